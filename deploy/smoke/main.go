// Command smoke is the helper of scripts/smoke-container.sh. It is built
// static (CGO_ENABLED=0), so that it runs unchanged on the host, under
// bubblewrap and inside the distroless image, none of which needs a shell
// for it:
//
//	smoke probe [flags]            inside the sandbox: check the profile from within
//	smoke listen -addr-file FILE   on the host: a listener the sandbox must not reach
//	smoke mcp [flags] -- CMD...    drive bastion serve, run by CMD, through an MCP exchange
//
// Each check prints one line, "ok" or "FAIL" and what was seen; the exit
// status is 1 when any check failed, 2 on a usage error.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var failed bool
	switch os.Args[1] {
	case "probe":
		failed = probe(os.Args[2:])
	case "listen":
		failed = listen(os.Args[2:])
	case "mcp":
		failed = mcp(os.Args[2:])
	case "true":
		// The child of the user-namespace check.
	default:
		usage()
	}
	if failed {
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: smoke probe [flags] | smoke listen -addr-file FILE | smoke mcp [flags] -- CMD...")
	os.Exit(2)
}

// checker prints one line per check and remembers whether one failed.
type checker struct{ failed bool }

func (c *checker) ok(format string, a ...any) { fmt.Printf("ok    "+format+"\n", a...) }

func (c *checker) fail(format string, a ...any) {
	c.failed = true
	fmt.Printf("FAIL  "+format+"\n", a...)
}

func (c *checker) check(good bool, format string, a ...any) {
	if good {
		c.ok(format, a...)
	} else {
		c.fail(format, a...)
	}
}

func list(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// ---- probe -------------------------------------------------------------

func probe(args []string) bool {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	uid := fs.Int("uid", 10001, "the user ID the process must run as (-1: any)")
	gid := fs.Int("gid", 10001, "the group ID the process must run as, with no other group (-1: any)")
	readonly := fs.String("readonly", "", "comma-separated paths on read-only mounts: no file may be created in them (or opened for writing), EROFS")
	writable := fs.String("writable", "", "comma-separated directories a file can be created, written and removed in")
	tmpMax := fs.Int64("tmpfs-max-bytes", 0, "the size of the tmpfs at the first -writable directory must be at most this (0: not checked)")
	noexec := fs.String("noexec", "", "comma-separated paths whose mounts must be noexec, nosuid and nodev")
	caps := fs.Bool("no-caps", false, "every capability set (inheritable, permitted, effective, bounding, ambient) is empty")
	nnp := fs.Bool("no-new-privs", false, "no_new_privs is set (setuid bits and file capabilities cannot raise privileges)")
	seccomp := fs.Bool("seccomp", false, "a seccomp filter is in force (Seccomp: 2)")
	loopback := fs.Bool("loopback-only", false, "no network interface but lo")
	unreachable := fs.String("unreachable", "", "comma-separated TCP addresses a connection to must fail")
	noUserns := fs.Bool("no-userns", false, "a child in a new user namespace cannot be started")
	pidsMax := fs.Int("pids-max", 0, "the cgroup's pids.max (0: not checked)")
	memMax := fs.Int64("memory-max", 0, "the cgroup's memory limit in bytes (0: not checked)")
	cpus := fs.Float64("cpus", 0, "the cgroup's CPU quota in CPUs (0: not checked)")
	fs.Parse(args)

	var c checker
	if *uid >= 0 || *gid >= 0 {
		groups, _ := os.Getgroups()
		u, eu, g, eg := os.Getuid(), os.Geteuid(), os.Getgid(), os.Getegid()
		good := (*uid < 0 || u == *uid && eu == *uid) &&
			(*gid < 0 || g == *gid && eg == *gid && (len(groups) == 0 || slices.Equal(groups, []int{*gid})))
		c.check(good, "uid %d euid %d gid %d egid %d groups %v (want %d:%d)", u, eu, g, eg, groups, *uid, *gid)
	}
	for _, p := range list(*readonly) {
		checkReadOnly(&c, p)
	}
	for i, d := range list(*writable) {
		checkWritable(&c, d, i == 0 && *tmpMax > 0, *tmpMax)
	}
	for _, p := range list(*noexec) {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			c.fail("mount flags of %s: %v", p, err)
			continue
		}
		const want = unix.ST_NOEXEC | unix.ST_NOSUID | unix.ST_NODEV
		c.check(st.Flags&want == want, "%s is mounted noexec,nosuid,nodev (flags %#x)", p, st.Flags)
	}
	status, err := os.ReadFile("/proc/self/status")
	if (*caps || *nnp || *seccomp) && err != nil {
		c.fail("/proc/self/status: %v", err)
	}
	field := func(name string) string {
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				return strings.TrimSpace(v)
			}
		}
		return "(absent)"
	}
	if *caps && err == nil {
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			v := field(set)
			n, perr := strconv.ParseUint(v, 16, 64)
			c.check(perr == nil && n == 0, "%s %s (no capabilities)", set, v)
		}
	}
	if *nnp && err == nil {
		c.check(field("NoNewPrivs") == "1", "NoNewPrivs %s", field("NoNewPrivs"))
	}
	if *seccomp && err == nil {
		c.check(field("Seccomp") == "2", "Seccomp %s (2: a filter is in force)", field("Seccomp"))
	}
	if *loopback {
		ifs, err := net.Interfaces()
		var names []string
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		c.check(err == nil && (len(names) == 0 || slices.Equal(names, []string{"lo"})), "network interfaces %v (want lo only)%s", names, because(err))
	}
	for _, a := range list(*unreachable) {
		conn, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err == nil {
			conn.Close()
			c.fail("connected to %s: the sandbox reaches the host's network", a)
			continue
		}
		c.ok("cannot connect to %s (%v)", a, err)
	}
	if *noUserns {
		cmd := exec.Command("/proc/self/exe", "true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
		err := cmd.Run()
		c.check(err != nil, "a child in a new user namespace cannot start (%v)", errOr(err))
	}
	if *pidsMax > 0 || *memMax > 0 || *cpus > 0 {
		checkCgroup(&c, *pidsMax, *memMax, *cpus)
	}
	return c.failed
}

func errOr(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// because is ": " and the error, or nothing.
func because(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// checkReadOnly requires that p refuses writes because its mount is
// read-only (EROFS), not merely because of file permissions, and that
// statfs reports the mount read-only.
func checkReadOnly(c *checker, p string) {
	fi, err := os.Stat(p)
	if err != nil {
		c.fail("read-only %s: %v", p, err)
		return
	}
	var werr error
	what := "open for writing"
	if fi.IsDir() {
		what = "create a file in"
		var f *os.File
		f, werr = os.OpenFile(filepath.Join(p, fmt.Sprintf(".smoke-write-%d", os.Getpid())), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if werr == nil {
			f.Close()
			os.Remove(f.Name())
		}
	} else {
		var f *os.File
		f, werr = os.OpenFile(p, os.O_WRONLY, 0)
		if werr == nil {
			f.Close()
		}
	}
	if fi.IsDir() {
		// Creating a name asks for write access to the mount first: EROFS
		// before any permission check.
		c.check(errors.Is(werr, syscall.EROFS), "cannot %s %s: %v (want EROFS)", what, p, errOr(werr))
	} else {
		// Opening an existing file checks its permissions first; the
		// statfs below shows the mount read-only whoever owns the file.
		c.check(errors.Is(werr, syscall.EROFS) || errors.Is(werr, syscall.EACCES), "cannot %s %s: %v (want EROFS or EACCES)", what, p, errOr(werr))
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		c.fail("statfs %s: %v", p, err)
		return
	}
	c.check(st.Flags&unix.ST_RDONLY != 0, "%s is on a read-only mount (flags %#x)", p, st.Flags)
}

func checkWritable(c *checker, dir string, sized bool, max int64) {
	name := filepath.Join(dir, fmt.Sprintf(".smoke-write-%d", os.Getpid()))
	data := []byte("bastion smoke\n")
	err := os.WriteFile(name, data, 0o600)
	var back []byte
	if err == nil {
		back, err = os.ReadFile(name)
		if rerr := os.Remove(name); err == nil {
			err = rerr
		}
	}
	c.check(err == nil && bytes.Equal(back, data), "can write, read and remove a file in %s%s", dir, because(err))
	if !sized {
		return
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		c.fail("statfs %s: %v", dir, err)
		return
	}
	size := int64(st.Blocks) * st.Bsize
	c.check(st.Type == unix.TMPFS_MAGIC && size > 0 && size <= max, "%s is a tmpfs of %d bytes (at most %d; type %#x)", dir, size, max, st.Type)
}

// checkCgroup reads the limits of the process's cgroup (v2, or v1's
// controllers).
func checkCgroup(c *checker, pids int, mem int64, cpus float64) {
	readFirst := func(paths ...string) (string, error) {
		var err error
		for _, p := range paths {
			var b []byte
			if b, err = os.ReadFile(p); err == nil {
				return strings.TrimSpace(string(b)), nil
			}
		}
		return "", err
	}
	if pids > 0 {
		v, err := readFirst("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max")
		c.check(err == nil && v == strconv.Itoa(pids), "pids.max %s (want %d)%s", v, pids, because(err))
	}
	if mem > 0 {
		v, err := readFirst("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
		c.check(err == nil && v == strconv.FormatInt(mem, 10), "memory limit %s (want %d)%s", v, mem, because(err))
	}
	if cpus > 0 {
		got := -1.0
		v, err := readFirst("/sys/fs/cgroup/cpu.max")
		if f := strings.Fields(v); err == nil && len(f) == 2 {
			q, qerr := strconv.ParseFloat(f[0], 64)
			p, perr := strconv.ParseFloat(f[1], 64)
			if qerr == nil && perr == nil && p > 0 {
				got = q / p
			}
		} else if q, qerr := readFirst("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); qerr == nil {
			p, _ := readFirst("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
			qn, _ := strconv.ParseFloat(q, 64)
			pn, _ := strconv.ParseFloat(p, 64)
			if pn > 0 && qn > 0 {
				got, v, err = qn/pn, q+" "+p, nil
			}
		}
		c.check(err == nil && got == cpus, "cpu quota %q = %g CPUs (want %g)%s", v, got, cpus, because(err))
	}
}

// checkHostIDs reads, on the host, the credentials of the sandboxed
// process: every UID and GID must be id, with no supplementary group
// but id, so that outside its namespaces too it is nobody the host knows
// (not root mapped to 10001).
func checkHostIDs(c *checker, pid, id int) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		c.fail("host credentials of pid %d: %v", pid, err)
		return
	}
	want := strconv.Itoa(id)
	for _, l := range strings.Split(string(status), "\n") {
		name, v, _ := strings.Cut(l, ":")
		if name != "Uid" && name != "Gid" && name != "Groups" {
			continue
		}
		f := strings.Fields(v)
		good := len(f) > 0 || name == "Groups"
		for _, x := range f {
			good = good && x == want
		}
		got := strings.Join(f, " ")
		if got == "" {
			got = "(none)"
		}
		c.check(good, "on the host, pid %d has %s %s (want %s)", pid, name, got, want)
	}
}

// ---- listen ------------------------------------------------------------

// listen opens a TCP listener on the host's loopback, proves it reachable
// from the host, writes its address to -addr-file and accepts (and drops)
// connections until -for elapses or the process is killed.
func listen(args []string) bool {
	fs := flag.NewFlagSet("listen", flag.ExitOnError)
	addrFile := fs.String("addr-file", "", "file the listener's address is written to")
	life := fs.Duration("for", 2*time.Minute, "how long to listen")
	fs.Parse(args)
	if *addrFile == "" {
		usage()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "smoke listen:", err)
		return true
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	conn, err := net.DialTimeout("tcp", l.Addr().String(), 2*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "smoke listen: the host cannot reach its own listener:", err)
		return true
	}
	conn.Close()
	tmp := *addrFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(l.Addr().String()+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "smoke listen:", err)
		return true
	}
	if err := os.Rename(tmp, *addrFile); err != nil {
		fmt.Fprintln(os.Stderr, "smoke listen:", err)
		return true
	}
	time.Sleep(*life)
	return false
}

// ---- mcp ---------------------------------------------------------------

const protocolVersion = "2025-11-25"

var exchange = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocolVersion + `","capabilities":{},"clientInfo":{"name":"smoke-container","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sandbox_fs_read","arguments":{"relative_path":"reports/2026-q3.md"}}}`,
	`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"sandbox_fs_read","arguments":{"relative_path":"../../../../etc/passwd"}}}`,
}

type response struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		IsError *bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Structured struct {
			Content string `json:"content"`
		} `json:"structuredContent"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// mcp runs CMD (bastion serve, under bwrap or a container engine) and
// drives it: the whole exchange then EOF (it must answer and exit 0), or,
// with -stop-info-fd, initialize and then SIGTERM to the pid bubblewrap
// reports on its --info-fd (it must drain and exit 0).
func mcp(args []string) bool {
	fs := flag.NewFlagSet("mcp", flag.ExitOnError)
	wantFile := fs.String("want-file", "", "host copy of reports/2026-q3.md: the read must return exactly this")
	stopInfo := fs.Bool("stop-info-fd", false, "pass a pipe as fd 3 (bwrap --info-fd 3), initialize, then SIGTERM the child-pid it reports")
	hostID := fs.Int("host-id", -1, "with -stop-info-fd: the host UID and GID the child must run as (-1: not checked)")
	timeout := fs.Duration("timeout", 30*time.Second, "the longest the exchange may take")
	fs.Parse(args)
	argv := fs.Args()
	if len(argv) == 0 {
		usage()
	}
	var c checker
	cmd := exec.Command(argv[0], argv[1:]...)
	// The server's log, shown when a check fails.
	var logs bytes.Buffer
	cmd.Stderr = &logs
	defer func() {
		if c.failed {
			fmt.Println("   the server's stderr:")
			for _, l := range strings.Split(strings.TrimRight(logs.String(), "\n"), "\n") {
				fmt.Println("   !", l)
			}
		}
	}()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		c.fail("stdin: %v", err)
		return true
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.fail("stdout: %v", err)
		return true
	}
	var info *os.File
	if *stopInfo {
		r, w, err := os.Pipe()
		if err != nil {
			c.fail("pipe: %v", err)
			return true
		}
		cmd.ExtraFiles = []*os.File{w}
		info = r
		defer r.Close()
		defer w.Close()
	}
	if err := cmd.Start(); err != nil {
		c.fail("start %s: %v", argv[0], err)
		return true
	}
	if info != nil {
		cmd.ExtraFiles[0].Close()
	}
	timer := time.AfterFunc(*timeout, func() {
		fmt.Printf("FAIL  no end after %s: killing %s\n", *timeout, argv[0])
		cmd.Process.Kill()
	})
	defer timer.Stop()

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	got := map[string]response{}
	readLine := func() bool {
		l, ok := <-lines
		if !ok {
			return false
		}
		short := l
		if len(short) > 160 {
			short = short[:160] + "..."
		}
		fmt.Println("   <-", short)
		for _, b := range []byte(l) {
			if b >= 0x80 {
				c.fail("a non-ASCII byte on stdout")
				break
			}
		}
		var r response
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			c.fail("stdout line is not JSON: %v", err)
			return true
		}
		if len(r.ID) > 0 {
			got[string(r.ID)] = r
		}
		return true
	}

	if *stopInfo {
		fmt.Println("   ->", exchange[0])
		io.WriteString(stdin, exchange[0]+"\n")
		for got["1"].Result.ProtocolVersion == "" && got["1"].Error == nil && readLine() {
		}
		c.check(got["1"].Result.ProtocolVersion == protocolVersion, "initialize answered with protocolVersion %q", got["1"].Result.ProtocolVersion)
		var ev struct {
			Pid int `json:"child-pid"`
		}
		if err := json.NewDecoder(info).Decode(&ev); err != nil || ev.Pid <= 0 {
			c.fail("no child-pid on the info fd: %v", err)
			cmd.Process.Kill()
			cmd.Wait()
		} else {
			if *hostID >= 0 {
				checkHostIDs(&c, ev.Pid, *hostID)
			}
			start := time.Now()
			err := syscall.Kill(ev.Pid, syscall.SIGTERM)
			c.check(err == nil, "SIGTERM sent to bastion serve (pid %d) with its stdin still open%s", ev.Pid, because(err))
			for readLine() {
			}
			err = cmd.Wait()
			c.check(err == nil, "bastion serve drained and exited 0 on SIGTERM in %s%s", time.Since(start).Round(time.Millisecond), because(err))
		}
		stdin.Close()
		return c.failed
	}

	for _, r := range exchange {
		fmt.Println("   ->", r)
		io.WriteString(stdin, r+"\n")
	}
	stdin.Close()
	for readLine() {
	}
	err = cmd.Wait()
	c.check(err == nil, "bastion serve read to EOF and exited 0%s", because(err))

	r := got["1"]
	c.check(r.Result.ProtocolVersion == protocolVersion && r.Result.ServerInfo.Name == "mcp-bastion",
		"initialize: protocolVersion %q, serverInfo.name %q", r.Result.ProtocolVersion, r.Result.ServerInfo.Name)
	var names []string
	for _, t := range got["2"].Result.Tools {
		names = append(names, t.Name)
	}
	c.check(slices.Contains(names, "sandbox_fs_read"), "tools/list: %v", names)
	r = got["3"]
	want := ""
	if *wantFile != "" {
		b, err := os.ReadFile(*wantFile)
		if err != nil {
			c.fail("%s: %v", *wantFile, err)
		}
		want = string(b)
	}
	c.check(r.Error == nil && r.Result.IsError != nil && !*r.Result.IsError && r.Result.Structured.Content != "" &&
		(want == "" || r.Result.Structured.Content == want),
		"sandbox_fs_read reports/2026-q3.md: %d bytes, the file's content", len(r.Result.Structured.Content))
	r = got["4"]
	text := ""
	if len(r.Result.Content) > 0 {
		text = r.Result.Content[0].Text
	}
	c.check(r.Result.IsError != nil && *r.Result.IsError && strings.Contains(text, "MCP_ACCESS_DENIED"),
		"sandbox_fs_read ../../../../etc/passwd refused: %.90s", text)
	return c.failed
}
