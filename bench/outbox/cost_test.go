package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestServerCPU: the server's CPU is its postmaster's and its children's,
// reaped ones included, and no other process's, whatever its name holds.
func TestServerCPU(t *testing.T) {
	proc := t.TempDir()
	write := func(pid, stat string) {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime …
	write("100", "100 (postgres) S 1 100 100 0 -1 0 0 0 0 0 10 5 40 10 20 0 1 0")       // postmaster: 15 own + 50 reaped
	write("101", "101 (postgres: walsender) S 100 100 100 0 -1 0 0 0 0 0 7 3 0 0 20 0") // a child: 10
	write("102", "102 (postgres) S 100 100 100 0 -1 0 0 0 0 0 1 1 0 0 20 0")            // the backend asking: 2
	write("200", "200 (other) S 1 200 200 0 -1 0 0 0 0 0 99 99 99 99 20 0")             // another server's postmaster
	write("201", "201 (postgres) S 200 200 200 0 -1 0 0 0 0 0 99 0 0 0 20 0")           // and its child
	got, err := serverCPU(proc, 102)
	if err != nil {
		t.Fatal(err)
	}
	if want := 77 * clockTick; got != want {
		t.Errorf("serverCPU = %s, want %s", got, want)
	}
	if _, err := serverCPU(proc, 999); err == nil {
		t.Error("serverCPU of a pid that does not exist: no error")
	}
}
