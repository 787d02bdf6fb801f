package testenv

import "sync"

// AllAtOnce runs f in n goroutines released at the same moment, not one
// after another as they start, and returns when all have returned: how a
// test makes copies of one request or delivery race for the same row.
func AllAtOnce(n int, f func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f()
		}()
	}
	close(start)
	wg.Wait()
}
