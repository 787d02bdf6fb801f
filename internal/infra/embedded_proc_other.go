//go:build unix && !linux

package infra

import "syscall"

// postgresProcAttr runs the server as owner (nil: as we are) in a process
// group of its own, so the terminal's Ctrl-C reaches only us and we stop the
// services before the database. Only Linux can also have it stopped when we
// die without stopping it.
func postgresProcAttr(owner *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: owner, Setpgid: true}
}
