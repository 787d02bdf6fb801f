package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// What a contender costs PostgreSQL per row, beside how fast it is: the
// write-ahead log it makes (the insert itself, and then a sent mark, a
// NOTIFY, a slot's decoding…) and the CPU of the server's processes,
// walsenders included. Read around the trickle phase, where rows commit
// one per transaction as a service writes them.

// reading is PostgreSQL's WAL position and CPU at one moment.
type reading struct {
	lsn string
	cpu time.Duration
}

// read takes a reading of e's server.
func (e *env) read(ctx context.Context) (reading, error) {
	var r reading
	var backend int
	if err := e.db.QueryRowxContext(ctx, `SELECT pg_current_wal_lsn()::text, pg_backend_pid()`).Scan(&r.lsn, &backend); err != nil {
		return r, fmt.Errorf("read wal position: %w", err)
	}
	cpu, err := serverCPU("/proc", backend)
	if err != nil {
		return r, err
	}
	r.cpu = cpu
	return r, nil
}

// costSince returns the WAL bytes and the CPU e's server spent per row
// since r, for rows rows.
func (e *env) costSince(ctx context.Context, r reading, rows int) (walPerRow float64, cpuPerRow time.Duration, err error) {
	now, err := e.read(ctx)
	if err != nil {
		return 0, 0, err
	}
	var wal float64
	if err := e.db.GetContext(ctx, &wal, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)`, now.lsn, r.lsn); err != nil {
		return 0, 0, fmt.Errorf("wal difference: %w", err)
	}
	if rows == 0 {
		return 0, 0, nil
	}
	return wal / float64(rows), (now.cpu - r.cpu) / time.Duration(rows), nil
}

// clockTick is Linux's USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTick = 10 * time.Millisecond

// serverCPU sums the CPU time of the PostgreSQL server that backend (a
// backend's pid) belongs to: its postmaster and every child, with the
// children the postmaster has reaped (cutime), so a backend that exits
// between two readings still counts. Only that server's: other clusters
// on the machine are left out.
func serverCPU(proc string, backend int) (time.Duration, error) {
	_, postmaster, err := stat(proc, backend)
	if err != nil {
		return 0, err
	}
	dirs, err := filepath.Glob(filepath.Join(proc, "[0-9]*"))
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		cpu, ppid, err := stat(proc, pid)
		if err != nil || (pid != postmaster && ppid != postmaster) {
			continue // gone since the listing, or not this server's
		}
		total += cpu
	}
	return total, nil
}

// stat returns a process's CPU time (utime+stime+cutime+cstime) and its
// parent's pid from /proc/<pid>/stat.
func stat(proc string, pid int) (cpu time.Duration, ppid int, err error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, err
	}
	// The command name is in parentheses and may hold spaces; the fields
	// after it are space-separated: state ppid … utime(14) stime cutime cstime.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("%s: no command name", pid2path(proc, pid))
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("%s: %d fields", pid2path(proc, pid), len(f))
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, fmt.Errorf("%s: ppid: %w", pid2path(proc, pid), err)
	}
	for _, v := range f[11:15] { // utime stime cutime cstime
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", pid2path(proc, pid), err)
		}
		cpu += time.Duration(n) * clockTick
	}
	return cpu, ppid, nil
}

func pid2path(proc string, pid int) string { return filepath.Join(proc, strconv.Itoa(pid), "stat") }
