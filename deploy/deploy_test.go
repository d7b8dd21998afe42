package deploy

// The lint of the container profile. No hadolint, no container engine:
// these tests read deploy/Dockerfile, deploy/compose.yaml and
// deploy/kubernetes.yaml and check each property docs/container.md
// promises. TestLintCatchesEveryRemoval removes the properties one at a
// time and requires the lint to name what went missing, so that a check
// which passes whatever the file says cannot stay unnoticed.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-bastion/bastion/internal/config"
)

// The profile, as the three files must spell it.
const (
	wantUser    = "10001:10001"
	wantUID     = 10001
	dataDir     = "/safe_data_dir"
	binaryPath  = "/usr/local/bin/bastion"
	pidsLimit   = 64
	memoryBytes = 256 << 20
	tmpBytes    = 16 << 20
	// A placeholder DSN, to check that the environment a file sets is
	// one bastion serve accepts; never connected to.
	placeholderDSN = "host=db.invalid user=mcp_reader dbname=app"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func report(t *testing.T, name string, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Errorf("%s: %s", name, p)
	}
}

func TestDockerfile(t *testing.T) {
	report(t, "Dockerfile", lintDockerfile(read(t, "Dockerfile")))
}

func TestCompose(t *testing.T) {
	report(t, "compose.yaml", lintCompose(read(t, "compose.yaml")))
}

func TestKubernetes(t *testing.T) {
	report(t, "kubernetes.yaml", lintKubernetes(read(t, "kubernetes.yaml")))
}

// TestLintCatchesEveryRemoval takes each property out of the shipped file
// (OLD must occur exactly once and is replaced by NEW) and requires a
// problem containing WANT.
func TestLintCatchesEveryRemoval(t *testing.T) {
	lints := map[string]func(string) []string{
		"Dockerfile":      lintDockerfile,
		"compose.yaml":    lintCompose,
		"kubernetes.yaml": lintKubernetes,
	}
	for _, m := range []struct{ file, name, old, new, want string }{
		// The image.
		{"Dockerfile", "single stage", "FROM gcr.io/distroless/base-debian12:nonroot@sha256:8b9f2e503e55aff85b79d6b22c7a63a65170e8698ae80de680e3f5ea600977bf\n", "", "multi-stage"},
		{"Dockerfile", "builder by tag only", "golang:1.26-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d", "golang:1.26-bookworm", "pinned by digest"},
		{"Dockerfile", "runtime by tag only", "base-debian12:nonroot@sha256:8b9f2e503e55aff85b79d6b22c7a63a65170e8698ae80de680e3f5ea600977bf", "base-debian12:nonroot", "pinned by digest"},
		{"Dockerfile", "cgo off", "CGO_ENABLED=1", "CGO_ENABLED=0", "CGO_ENABLED=1"},
		{"Dockerfile", "cgo unset", "    CGO_ENABLED=1 \\\n", "", "CGO_ENABLED=1"},
		{"Dockerfile", "bastion not built", "./cmd/bastion \\", "./cmd/other \\", "go build"},
		{"Dockerfile", "static runtime", "FROM gcr.io/distroless/base-debian12", "FROM gcr.io/distroless/static-debian12", "glibc"},
		{"Dockerfile", "runtime with a shell", "FROM gcr.io/distroless/base-debian12:nonroot", "FROM gcr.io/distroless/base-debian12:debug-nonroot", "glibc"},
		{"Dockerfile", "runtime with a package manager", "FROM gcr.io/distroless/base-debian12:nonroot", "FROM debian:bookworm-slim", "glibc"},
		{"Dockerfile", "glibc releases differ", "golang:1.26-bookworm", "golang:1.26-trixie", "Debian release"},
		{"Dockerfile", "RUN in the runtime stage", "ENV MCP_SAFE_DATA_DIR", "RUN [\"/usr/local/bin/bastion\", \"--help\"]\nENV MCP_SAFE_DATA_DIR", "RUN"},
		{"Dockerfile", "ADD in the runtime stage", "ENV MCP_SAFE_DATA_DIR", "ADD https://example.com/x /x\nENV MCP_SAFE_DATA_DIR", "ADD"},
		{"Dockerfile", "a port", "STOPSIGNAL SIGTERM", "EXPOSE 8080\nSTOPSIGNAL SIGTERM", "EXPOSE"},
		{"Dockerfile", "no USER", "USER 10001:10001\n", "", "USER"},
		{"Dockerfile", "root USER", "USER 10001:10001", "USER 0:0", "USER"},
		{"Dockerfile", "named USER", "USER 10001:10001", "USER nonroot", "USER"},
		{"Dockerfile", "no STOPSIGNAL", "STOPSIGNAL SIGTERM\n", "", "STOPSIGNAL"},
		{"Dockerfile", "other STOPSIGNAL", "STOPSIGNAL SIGTERM", "STOPSIGNAL SIGKILL", "STOPSIGNAL"},
		{"Dockerfile", "shell-form ENTRYPOINT", `ENTRYPOINT ["/usr/local/bin/bastion", "serve"]`, "ENTRYPOINT /usr/local/bin/bastion serve", "exec form"},
		{"Dockerfile", "no ENTRYPOINT", `ENTRYPOINT ["/usr/local/bin/bastion", "serve"]`, "", "ENTRYPOINT"},
		{"Dockerfile", "ENTRYPOINT not serve", `ENTRYPOINT ["/usr/local/bin/bastion", "serve"]`, `ENTRYPOINT ["/usr/local/bin/bastion", "gateway"]`, "serve"},
		{"Dockerfile", "ENTRYPOINT elsewhere", `ENTRYPOINT ["/usr/local/bin/bastion", "serve"]`, `ENTRYPOINT ["/bastion", "serve"]`, "copied"},
		{"Dockerfile", "binary owned by the user", "COPY --from=build /out/bastion", "COPY --from=build --chown=10001:10001 /out/bastion", "--chown"},
		{"Dockerfile", "binary from the context", "COPY --from=build /out/bastion /usr/local/bin/bastion", "COPY bin/bastion /usr/local/bin/bastion", "build stage"},
		{"Dockerfile", "no data dir", "ENV MCP_SAFE_DATA_DIR=/safe_data_dir\n", "", "MCP_SAFE_DATA_DIR"},
		{"Dockerfile", "unknown variable", "ENV MCP_SAFE_DATA_DIR=/safe_data_dir", "ENV MCP_SAFE_DATA_DIR=/safe_data_dir MCP_SAFE_DIR=/x", "configuration"},
		{"Dockerfile", "no mount point", "COPY --from=build /out/safe_data_dir /safe_data_dir\n", "", "mount point"},

		// Compose.
		{"compose.yaml", "writable root", "\n  read_only: true\n", "\n", "read_only"},
		{"compose.yaml", "capabilities kept", "  cap_drop:\n    - ALL\n", "", "cap_drop"},
		{"compose.yaml", "a capability added", "  cap_drop:\n", "  cap_add:\n    - NET_RAW\n  cap_drop:\n", "cap_add"},
		{"compose.yaml", "new privileges", "    - no-new-privileges:true\n", "    - label=disable\n", "no-new-privileges"},
		{"compose.yaml", "seccomp off", "    - no-new-privileges:true\n", "    - no-new-privileges:true\n    - seccomp=unconfined\n", "unconfined"},
		{"compose.yaml", "no user", "  user: \"10001:10001\"\n", "", "user"},
		{"compose.yaml", "no tmpfs", "  tmpfs:\n    - /tmp:rw,noexec,nosuid,nodev,size=16m\n", "", "/tmp"},
		{"compose.yaml", "exec tmpfs", "/tmp:rw,noexec,", "/tmp:rw,", "noexec"},
		{"compose.yaml", "unbounded tmpfs", ",size=16m", "", "size"},
		{"compose.yaml", "no pids limit", "  pids_limit: 64\n", "", "pids_limit"},
		{"compose.yaml", "no memory limit", "  mem_limit: 256m\n", "", "mem_limit"},
		{"compose.yaml", "swap", "  memswap_limit: 256m\n", "", "memswap_limit"},
		{"compose.yaml", "no cpu limit", "  cpus: 1\n", "", "cpus"},
		{"compose.yaml", "no stop signal", "  stop_signal: SIGTERM\n", "", "stop_signal"},
		{"compose.yaml", "grace shorter than the drain", "stop_grace_period: 10s", "stop_grace_period: 2s", "stop_grace_period"},
		{"compose.yaml", "writable data", "      read_only: true\n", "", dataDir},
		{"compose.yaml", "no data", "      target: /safe_data_dir\n", "      target: /data\n", dataDir},
		{"compose.yaml", "stdin closed", "  stdin_open: true\n", "", "stdin_open"},
		{"compose.yaml", "a TTY", "  tty: false\n", "  tty: true\n", "tty"},
		{"compose.yaml", "privileged", "\n  read_only: true\n", "\n  read_only: true\n  privileged: true\n", "privileged"},
		{"compose.yaml", "network without a DSN", "    network_mode: none\n", "", "network_mode"},
		{"compose.yaml", "host network", "    network_mode: none\n", "    network_mode: host\n", "network_mode"},
		{"compose.yaml", "DSN network reaches out", "    internal: true\n", "", "internal"},
		{"compose.yaml", "DSN in the file", "      - MCP_SQL_DSN\n", "      - MCP_SQL_DSN=postgres://reader:secret@db/app\n", "inline"},
		{"compose.yaml", "unknown variable", "      - MCP_SQL_DSN\n", "      - MCP_SQL_DSN\n      - MCP_SQL_MAXROWS=5\n", "configuration"},
		{"compose.yaml", "other Dockerfile", "dockerfile: deploy/Dockerfile", "dockerfile: Dockerfile", "deploy/Dockerfile"},

		// Kubernetes.
		{"kubernetes.yaml", "namespace not restricted", "pod-security.kubernetes.io/enforce: restricted", "pod-security.kubernetes.io/enforce: baseline", "restricted"},
		{"kubernetes.yaml", "root allowed", "  securityContext:\n    runAsNonRoot: true\n", "  securityContext:\n", "runAsNonRoot"},
		{"kubernetes.yaml", "container root allowed", "        runAsNonRoot: true\n", "        runAsNonRoot: false\n", "runAsNonRoot"},
		{"kubernetes.yaml", "other pod user", "\n    runAsUser: 10001\n", "\n    runAsUser: 1000\n", "runAsUser"},
		{"kubernetes.yaml", "other group", "\n    runAsGroup: 10001\n", "\n", "runAsGroup"},
		{"kubernetes.yaml", "no seccomp", "  securityContext:\n    runAsNonRoot: true\n    runAsUser: 10001\n    runAsGroup: 10001\n    seccompProfile:\n      type: RuntimeDefault\n",
			"  securityContext:\n    runAsNonRoot: true\n    runAsUser: 10001\n    runAsGroup: 10001\n", "seccompProfile"},
		{"kubernetes.yaml", "container seccomp off", "        seccompProfile:\n          type: RuntimeDefault\n", "        seccompProfile:\n          type: Unconfined\n", "seccompProfile"},
		{"kubernetes.yaml", "escalation", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", "allowPrivilegeEscalation"},
		{"kubernetes.yaml", "escalation unset", "        allowPrivilegeEscalation: false\n", "", "allowPrivilegeEscalation"},
		{"kubernetes.yaml", "writable root", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
		{"kubernetes.yaml", "capabilities kept", "          drop:\n            - ALL\n", "          drop:\n            - NET_RAW\n", "capabilities"},
		{"kubernetes.yaml", "a capability added", "          drop:\n", "          add:\n            - NET_ADMIN\n          drop:\n", "capabilities"},
		{"kubernetes.yaml", "privileged", "privileged: false", "privileged: true", "privileged"},
		{"kubernetes.yaml", "token mounted", "  automountServiceAccountToken: false\n", "", "automountServiceAccountToken"},
		{"kubernetes.yaml", "service links", "  enableServiceLinks: false\n", "", "enableServiceLinks"},
		{"kubernetes.yaml", "host network", "  hostNetwork: false\n", "  hostNetwork: true\n", "hostNetwork"},
		{"kubernetes.yaml", "no stdin", "      stdin: true\n", "", "stdin"},
		{"kubernetes.yaml", "a TTY", "      tty: false\n", "      tty: true\n", "tty"},
		{"kubernetes.yaml", "no cpu limit", "          cpu: \"1\"\n", "", "cpu"},
		{"kubernetes.yaml", "no memory limit", "          memory: 256Mi\n", "", "memory"},
		{"kubernetes.yaml", "tmp on disk", "        medium: Memory\n", "", "/tmp"},
		{"kubernetes.yaml", "tmp unbounded", "        sizeLimit: 16Mi\n", "", "/tmp"},
		{"kubernetes.yaml", "no tmp", "        - name: tmp\n          mountPath: /tmp\n", "", "/tmp"},
		{"kubernetes.yaml", "writable data mount", "          mountPath: /safe_data_dir\n          readOnly: true\n", "          mountPath: /safe_data_dir\n", dataDir},
		{"kubernetes.yaml", "writable claim", "        claimName: bastion-safe-data\n        readOnly: true\n", "        claimName: bastion-safe-data\n", dataDir},
		{"kubernetes.yaml", "host path", "      persistentVolumeClaim:\n        claimName: bastion-safe-data\n        readOnly: true\n", "      hostPath:\n        path: /srv/data\n", "hostPath"},
		{"kubernetes.yaml", "DSN in the file", "          valueFrom:\n            secretKeyRef:\n              name: bastion-sql\n              key: dsn\n              optional: true\n", "          value: postgres://reader:secret@db/app\n", "Secret"},
		{"kubernetes.yaml", "unknown variable", "        - name: MCP_SAFE_DATA_DIR\n", "        - name: MCP_SAFE_DIR\n", "configuration"},
		{"kubernetes.yaml", "no network policy", "  policyTypes:\n    - Ingress\n    - Egress\n", "  policyTypes:\n    - Ingress\n", "NetworkPolicy"},
		{"kubernetes.yaml", "open network policy", "    - Egress\n", "    - Egress\n  egress:\n    - {}\n", "NetworkPolicy"},
		{"kubernetes.yaml", "policy misses the pod", "  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: mcp-bastion\n", "  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: other\n", "NetworkPolicy"},
		{"kubernetes.yaml", "grace shorter than the drain", "terminationGracePeriodSeconds: 10", "terminationGracePeriodSeconds: 3", "terminationGracePeriodSeconds"},
	} {
		t.Run(m.file+"/"+m.name, func(t *testing.T) {
			text := read(t, m.file)
			if n := strings.Count(text, m.old); n != 1 {
				t.Fatalf("the edit does not apply: %q occurs %d times", m.old, n)
			}
			problems := lints[m.file](strings.Replace(text, m.old, m.new, 1))
			for _, p := range problems {
				if strings.Contains(p, m.want) {
					t.Logf("caught: %s", p)
					return
				}
			}
			t.Errorf("the lint does not notice (%q wanted in one of %q)", m.want, problems)
		})
	}
}

// loadEnv checks that bastion serve would start with env (KEY=value) and
// read every MCP_* variable in it: a bad value or a name close to a known
// one stops it, and an unknown name it would only warn about (and ignore)
// is a mistake in these files all the same.
func loadEnv(env []string) (*config.Config, error) {
	c, err := config.Load(env)
	if err == nil && len(c.Unrelated) > 0 {
		err = fmt.Errorf("unknown variables %v (bastion serve --help lists the known ones)", c.Unrelated)
	}
	return c, err
}

// drainGrace is bastion serve's default drain: a stop grace period must
// be longer, or the engine kills the server in the middle of a drain.
func drainGrace() time.Duration {
	c, err := config.Load(nil)
	if err != nil {
		panic(err)
	}
	return c.DrainGrace
}

// ---- Dockerfile ------------------------------------------------------

type instruction struct {
	line int
	cmd  string // upper case
	args string // continuation lines joined
}

type stage struct {
	from  instruction
	image string
	name  string
	body  []instruction
}

// parseDockerfile splits text into instructions (comments dropped,
// continuation lines joined, as the builder does) and stages.
func parseDockerfile(text string) []stage {
	lines := strings.Split(text, "\n")
	var all []instruction
	comment := func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "#") }
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || comment(l) {
			continue
		}
		start := i + 1
		var b strings.Builder
		for {
			cont := strings.HasSuffix(l, `\`)
			b.WriteString(strings.TrimSpace(strings.TrimSuffix(l, `\`)))
			if !cont {
				break
			}
			b.WriteByte(' ')
			i++
			for i < len(lines) && (comment(lines[i]) || strings.TrimSpace(lines[i]) == "") {
				i++
			}
			if i >= len(lines) {
				break
			}
			l = strings.TrimSpace(lines[i])
		}
		s := b.String()
		cmd, args := s, ""
		if j := strings.IndexAny(s, " \t"); j >= 0 {
			cmd, args = s[:j], strings.TrimSpace(s[j+1:])
		}
		all = append(all, instruction{line: start, cmd: strings.ToUpper(cmd), args: args})
	}
	var stages []stage
	for _, in := range all {
		if in.cmd == "FROM" {
			var f []string
			for _, w := range strings.Fields(in.args) {
				if !strings.HasPrefix(w, "--") {
					f = append(f, w)
				}
			}
			st := stage{from: in}
			if len(f) > 0 {
				st.image = f[0]
			}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
		}
	}
	return stages
}

// envOf returns the KEY=value pairs of ENV instructions (both forms).
func envOf(body []instruction) []string {
	var env []string
	for _, in := range body {
		if in.cmd != "ENV" {
			continue
		}
		f := strings.Fields(in.args)
		if len(f) > 0 && !strings.Contains(f[0], "=") {
			env = append(env, f[0]+"="+unquote(strings.Join(f[1:], " ")))
			continue
		}
		for _, kv := range f {
			k, v, _ := strings.Cut(kv, "=")
			env = append(env, k+"="+unquote(v))
		}
	}
	return env
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return strings.Trim(s, `'`)
}

type copyInstr struct {
	from, chown string
	src         []string
	dst         string
}

func parseCopy(args string) copyInstr {
	var c copyInstr
	var rest []string
	for _, w := range strings.Fields(args) {
		switch {
		case strings.HasPrefix(w, "--from="):
			c.from = strings.TrimPrefix(w, "--from=")
		case strings.HasPrefix(w, "--chown="):
			c.chown = strings.TrimPrefix(w, "--chown=")
		case strings.HasPrefix(w, "--"):
		default:
			rest = append(rest, w)
		}
	}
	if len(rest) > 0 {
		c.dst, c.src = rest[len(rest)-1], rest[:len(rest)-1]
	}
	return c
}

var (
	digestRef = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
	goBuild   = regexp.MustCompile(`\bgo build\b.*\./cmd/bastion\b`)
	// A distroless base with glibc: base or cc, never static (no libc),
	// never a debug tag (busybox shell).
	glibcRuntime = regexp.MustCompile(`^gcr\.io/distroless/(base|base-nossl|cc)-debian(\d+)(:[a-z0-9.-]+)?@`)
	debianNames  = map[string]string{"bullseye": "11", "bookworm": "12", "trixie": "13"}
	// The instructions a runtime stage without a shell may hold.
	runtimeAllowed = []string{"ARG", "COPY", "ENV", "LABEL", "USER", "WORKDIR", "STOPSIGNAL", "ENTRYPOINT"}
)

func lintDockerfile(text string) []string {
	var p []string
	bad := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	stages := parseDockerfile(text)
	if len(stages) < 2 {
		bad("not a multi-stage build: %d stage(s); the runtime stage must not hold the toolchain", len(stages))
		if len(stages) == 0 {
			return p
		}
	}
	for _, st := range stages {
		if !digestRef.MatchString(st.image) {
			bad("line %d: FROM %s is not pinned by digest (@sha256:...)", st.from.line, st.image)
		}
	}
	run, builders := stages[len(stages)-1], stages[:len(stages)-1]

	// The build: cgo on, bastion built, on the runtime's Debian release.
	names := map[string]stage{}
	cgo, built := false, false
	for _, st := range builders {
		if st.name != "" {
			names[st.name] = st
		}
		for _, kv := range envOf(st.body) {
			if kv == "CGO_ENABLED=1" {
				cgo = true
			}
		}
		for _, in := range st.body {
			if in.cmd == "RUN" && strings.Contains(in.args, "CGO_ENABLED=1") {
				cgo = true
			}
			if in.cmd == "RUN" && goBuild.MatchString(in.args) {
				built = true
			}
		}
	}
	if strings.Contains(text, "CGO_ENABLED=0") || !cgo {
		bad("the build stage does not set CGO_ENABLED=1 (the SQL parser is C)")
	}
	if !built {
		bad("no build stage runs go build ... ./cmd/bastion")
	}
	m := glibcRuntime.FindStringSubmatch(run.image)
	if m == nil || strings.Contains(run.image, "debug") {
		bad("line %d: the runtime base %s is not a distroless glibc base (gcr.io/distroless/base-debianN or cc-debianN, no debug tag): it must have glibc and no shell or package manager", run.from.line, run.image)
	} else {
		release := m[2]
		for _, st := range builders {
			match := false
			for name, n := range debianNames {
				if strings.Contains(st.image, name) && n == release {
					match = true
				}
			}
			if !match {
				bad("line %d: the build base %s is not Debian %s (bookworm for 12), the Debian release of the runtime's glibc", st.from.line, st.image, release)
			}
		}
	}

	// The runtime stage: nothing to run (no shell), nothing fetched.
	var user, signal, entry string
	entryLine := 0
	copied := map[string]bool{}
	for _, in := range run.body {
		if !slices.Contains(runtimeAllowed, in.cmd) {
			bad("line %d: %s in the runtime stage (it has no shell and exposes nothing; allowed: %s)", in.line, in.cmd, strings.Join(runtimeAllowed, " "))
		}
		switch in.cmd {
		case "USER":
			user = in.args
		case "STOPSIGNAL":
			signal = in.args
		case "ENTRYPOINT":
			entry, entryLine = in.args, in.line
		case "COPY":
			c := parseCopy(in.args)
			if c.chown != "" {
				bad("line %d: COPY --chown=%s: the image's files must stay root-owned, unwritable by the server", in.line, c.chown)
			}
			if _, ok := names[c.from]; !ok {
				bad("line %d: COPY %s does not come from a build stage (--from=<stage>)", in.line, c.dst)
				continue
			}
			copied[c.dst] = true
		}
	}
	if user != wantUser {
		bad("the runtime stage's USER is %q, want %q (numeric, so runAsNonRoot can verify it)", user, wantUser)
	}
	if signal != "SIGTERM" {
		bad("STOPSIGNAL is %q, want SIGTERM (bastion serve drains on it)", signal)
	}
	var argv []string
	switch {
	case entry == "":
		bad("the runtime stage has no ENTRYPOINT")
	case yaml.Unmarshal([]byte(entry), &argv) != nil || !strings.HasPrefix(entry, "["):
		bad("line %d: ENTRYPOINT %s is not in exec form (a JSON array): there is no shell", entryLine, entry)
	case len(argv) != 2 || argv[1] != "serve":
		bad("line %d: ENTRYPOINT %q does not run the binary's serve subcommand", entryLine, argv)
	case !copied[argv[0]]:
		bad("line %d: ENTRYPOINT runs %s, which no COPY --from=<build stage> copied", entryLine, argv[0])
	}
	env := envOf(run.body)
	if !slices.Contains(env, "MCP_SAFE_DATA_DIR="+dataDir) {
		bad("the runtime stage does not set MCP_SAFE_DATA_DIR=%s", dataDir)
	}
	if !copied[dataDir] {
		bad("the runtime stage does not create the mount point %s (COPY --from=<build stage> of an empty directory)", dataDir)
	}
	if _, err := loadEnv(env); err != nil {
		bad("bastion serve would not take the image's configuration as written: %v", err)
	}
	return p
}

// ---- Compose ---------------------------------------------------------

func lintCompose(text string) []string {
	var p []string
	bad := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return []string{err.Error()}
	}
	services, _ := doc["services"].(map[string]any)
	networks, _ := doc["networks"].(map[string]any)
	if _, ok := services["bastion"]; !ok {
		bad(`no service "bastion"`)
	}
	grace := drainGrace()
	for _, name := range sortedKeys(services) {
		s, _ := services[name].(map[string]any)
		svc := func(format string, a ...any) { bad("service %s: "+format, append([]any{name}, a...)...) }
		if s["read_only"] != true {
			svc("read_only is not true")
		}
		if !equalStrings(s["cap_drop"], []string{"ALL"}) {
			svc("cap_drop is %v, want [ALL]", s["cap_drop"])
		}
		if s["cap_add"] != nil {
			svc("cap_add is set: %v", s["cap_add"])
		}
		opts := stringList(s["security_opt"])
		if !slices.Contains(opts, "no-new-privileges:true") && !slices.Contains(opts, "no-new-privileges") {
			svc("security_opt lacks no-new-privileges:true")
		}
		for _, o := range opts {
			if strings.Contains(o, "unconfined") {
				svc("security_opt %s", o)
			}
		}
		if s["user"] != wantUser {
			svc("user is %v, want %q", s["user"], wantUser)
		}
		if s["privileged"] == true {
			svc("privileged")
		}
		for _, k := range []string{"pid", "ipc", "userns_mode", "cgroup"} {
			if s[k] == "host" {
				svc("%s: host", k)
			}
		}
		if s["devices"] != nil {
			svc("devices are passed in")
		}
		tmp := ""
		for _, t := range stringList(s["tmpfs"]) {
			if path, o, _ := strings.Cut(t, ":"); path == "/tmp" {
				tmp = o
			}
		}
		if tmp == "" {
			svc("no tmpfs on /tmp")
		} else {
			o := strings.Split(tmp, ",")
			for _, want := range []string{"noexec", "nosuid", "nodev"} {
				if !slices.Contains(o, want) {
					svc("the /tmp tmpfs lacks %s", want)
				}
			}
			size := ""
			for _, x := range o {
				if v, ok := strings.CutPrefix(x, "size="); ok {
					size = v
				}
			}
			if n, ok := composeBytes(size); !ok || n > tmpBytes {
				svc("the /tmp tmpfs has no size of at most 16m (size=%q)", size)
			}
		}
		if fmt.Sprint(s["pids_limit"]) != strconv.Itoa(pidsLimit) {
			svc("pids_limit is %v, want %d", s["pids_limit"], pidsLimit)
		}
		if n, ok := composeBytes(s["mem_limit"]); !ok || n != memoryBytes {
			svc("mem_limit is %v, want 256m", s["mem_limit"])
		}
		if n, ok := composeBytes(s["memswap_limit"]); !ok || n != memoryBytes {
			svc("memswap_limit is %v, want 256m (no swap beyond the memory limit)", s["memswap_limit"])
		}
		if c, err := strconv.ParseFloat(fmt.Sprint(s["cpus"]), 64); err != nil || c != 1 {
			svc("cpus is %v, want 1", s["cpus"])
		}
		if s["stop_signal"] != "SIGTERM" {
			svc("stop_signal is %v, want SIGTERM", s["stop_signal"])
		}
		if g, ok := s["stop_grace_period"].(string); ok {
			if d, err := time.ParseDuration(g); err != nil || d <= grace {
				svc("stop_grace_period %s is not longer than the drain grace (%s)", g, grace)
			}
		}
		if s["stdin_open"] != true {
			svc("stdin_open is not true: a stdio server needs its stdin")
		}
		if s["tty"] == true {
			svc("tty: a TTY rewrites the newline-delimited stream")
		}
		if b, _ := s["build"].(map[string]any); b == nil || b["dockerfile"] != "deploy/Dockerfile" || b["context"] != ".." {
			svc("build is not context .., dockerfile deploy/Dockerfile")
		}

		// The data: read-only at /safe_data_dir; every volume read-only.
		data := false
		vols, _ := s["volumes"].([]any)
		for _, v := range vols {
			target, ro := volumeOf(v)
			if !ro {
				svc("volume %s is writable", target)
			}
			if target == dataDir && ro {
				data = true
			}
		}
		if !data {
			svc("no read-only volume at %s", dataDir)
		}

		// The environment: names bastion serve knows, no DSN in the file.
		env, dsn := []string{"MCP_SAFE_DATA_DIR=" + dataDir}, false
		switch e := s["environment"].(type) {
		case []any:
			for _, x := range e {
				k, v, inline := strings.Cut(fmt.Sprint(x), "=")
				env, dsn = append(env, k+"="+v), dsn || k == "MCP_SQL_DSN"
				if k == "MCP_SQL_DSN" && inline {
					svc("MCP_SQL_DSN has an inline value: the DSN must come from the environment, never from this file")
				}
			}
		case map[string]any:
			for k, v := range e {
				env, dsn = append(env, k+"="+fmt.Sprint(v)), dsn || k == "MCP_SQL_DSN"
				if k == "MCP_SQL_DSN" && v != nil {
					svc("MCP_SQL_DSN has an inline value: the DSN must come from the environment, never from this file")
				}
			}
		}
		if s["env_file"] != nil {
			dsn = true
		}
		for i, kv := range env {
			if kv == "MCP_SQL_DSN=" || strings.HasPrefix(kv, "MCP_SQL_DSN=") {
				env[i] = "MCP_SQL_DSN=" + placeholderDSN
			}
		}
		if _, err := loadEnv(env); err != nil {
			svc("bastion serve would not take the configuration as written: %v", err)
		}

		// The network: none at all without a DSN; with one, only
		// internal networks (they reach the attached database, nothing
		// else).
		mode, _ := s["network_mode"].(string)
		nets := networkNames(s["networks"])
		switch {
		case !dsn && (mode != "none" || len(nets) > 0):
			svc("network_mode is %q with networks %v: without a DSN it must be none", mode, nets)
		case dsn && mode != "":
			svc("network_mode %q with a DSN: use an internal network that reaches the database", mode)
		case dsn && len(nets) == 0:
			svc("a DSN but no network to reach the database")
		}
		for _, n := range nets {
			def, _ := networks[n].(map[string]any)
			if def["internal"] != true {
				svc("network %s is not internal: true", n)
			}
		}
	}
	return p
}

// volumeOf returns a Compose volume's target and whether it is read-only,
// for the short ("src:dst:ro") and long syntax.
func volumeOf(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		f := strings.Split(v, ":")
		if len(f) < 2 {
			return v, false
		}
		ro := len(f) > 2 && slices.Contains(strings.Split(f[2], ","), "ro")
		return f[1], ro
	case map[string]any:
		t, _ := v["target"].(string)
		return t, v["read_only"] == true
	}
	return fmt.Sprint(v), false
}

func networkNames(v any) []string {
	switch v := v.(type) {
	case []any:
		return stringList(v)
	case map[string]any:
		return sortedKeys(v)
	}
	return nil
}

// composeBytes reads a Compose byte value: an integer, or a number with
// b, k, m or g.
func composeBytes(v any) (int64, bool) {
	s := strings.ToLower(fmt.Sprint(v))
	mult := int64(1)
	for suffix, m := range map[string]int64{"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "b": 1} {
		if t, ok := strings.CutSuffix(s, suffix); ok {
			s, mult = t, m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err == nil
}

// ---- Kubernetes ------------------------------------------------------

// restrictedVolumes are the volume types the restricted Pod Security
// Standard allows.
var restrictedVolumes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}

func lintKubernetes(text string) []string {
	var p []string
	bad := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader([]byte(text)))
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return []string{err.Error()}
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	restricted := map[string]bool{}
	type pod struct {
		name, ns string
		labels   map[string]any
		spec     map[string]any
	}
	var pods []pod
	var policies []map[string]any
	for _, d := range docs {
		meta, _ := d["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		switch d["kind"] {
		case "Namespace":
			labels, _ := meta["labels"].(map[string]any)
			restricted[name] = labels["pod-security.kubernetes.io/enforce"] == "restricted"
		case "NetworkPolicy":
			policies = append(policies, d)
		case "Pod":
			labels, _ := meta["labels"].(map[string]any)
			spec, _ := d["spec"].(map[string]any)
			pods = append(pods, pod{name, ns, labels, spec})
		case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
			tmpl := dig(d, "spec", "template")
			labels, _ := dig(tmpl, "metadata", "labels").(map[string]any)
			spec, _ := dig(tmpl, "spec").(map[string]any)
			pods = append(pods, pod{name, ns, labels, spec})
		}
	}
	if len(pods) == 0 {
		bad("no Pod (or workload with a pod template)")
	}
	grace := drainGrace()
	for _, pd := range pods {
		pb := func(format string, a ...any) { bad("pod %s: "+format, append([]any{pd.name}, a...)...) }
		if !restricted[pd.ns] {
			pb("its namespace %q is not a Namespace here labelled pod-security.kubernetes.io/enforce: restricted", pd.ns)
		}
		s := pd.spec
		psc, _ := s["securityContext"].(map[string]any)
		if psc["runAsNonRoot"] != true {
			pb("securityContext.runAsNonRoot is not true")
		}
		if psc["runAsUser"] != wantUID {
			pb("securityContext.runAsUser is %v, want %d", psc["runAsUser"], wantUID)
		}
		if psc["runAsGroup"] != wantUID {
			pb("securityContext.runAsGroup is %v, want %d", psc["runAsGroup"], wantUID)
		}
		if dig(psc, "seccompProfile", "type") != "RuntimeDefault" {
			pb("securityContext.seccompProfile.type is not RuntimeDefault")
		}
		if s["automountServiceAccountToken"] != false {
			pb("automountServiceAccountToken is not false: the server needs no API token")
		}
		if s["enableServiceLinks"] != false {
			pb("enableServiceLinks is not false: service links put FOO_SERVICE_HOST variables in the environment, MCP_* ones for a Service named mcp-*")
		}
		for _, k := range []string{"hostNetwork", "hostPID", "hostIPC", "hostUsers"} {
			if s[k] == true {
				pb("%s is true", k)
			}
		}
		if g, ok := s["terminationGracePeriodSeconds"].(int); ok && time.Duration(g)*time.Second <= grace {
			pb("terminationGracePeriodSeconds %d is not longer than the drain grace (%s)", g, grace)
		}
		vols := map[string]map[string]any{}
		vl, _ := s["volumes"].([]any)
		for _, v := range vl {
			v, _ := v.(map[string]any)
			name, _ := v["name"].(string)
			vols[name] = v
			for k := range v {
				if k != "name" && !slices.Contains(restrictedVolumes, k) {
					pb("volume %s is of type %s, which the restricted standard refuses", name, k)
				}
			}
		}
		cl, _ := s["containers"].([]any)
		for _, k := range []string{"initContainers", "ephemeralContainers"} {
			if l, _ := s[k].([]any); len(l) > 0 {
				pb("%s: the profile has one container", k)
			}
		}
		if len(cl) == 0 {
			pb("no container")
		}
		for _, c := range cl {
			c, _ := c.(map[string]any)
			cn, _ := c["name"].(string)
			cb := func(format string, a ...any) { pb("container %s: "+format, append([]any{cn}, a...)...) }
			sc, _ := c["securityContext"].(map[string]any)
			if v, ok := sc["runAsNonRoot"]; ok && v != true {
				cb("securityContext.runAsNonRoot is %v", v)
			}
			for _, k := range []string{"runAsUser", "runAsGroup"} {
				if v, ok := sc[k]; ok && v != wantUID {
					cb("securityContext.%s is %v, want %d", k, v, wantUID)
				}
			}
			if t := dig(sc, "seccompProfile", "type"); t != nil && t != "RuntimeDefault" {
				cb("securityContext.seccompProfile.type is %v, want RuntimeDefault", t)
			}
			if sc["allowPrivilegeEscalation"] != false {
				cb("securityContext.allowPrivilegeEscalation is not false")
			}
			if sc["readOnlyRootFilesystem"] != true {
				cb("securityContext.readOnlyRootFilesystem is not true")
			}
			if sc["privileged"] == true {
				cb("securityContext.privileged is true")
			}
			if !equalStrings(dig(sc, "capabilities", "drop"), []string{"ALL"}) || dig(sc, "capabilities", "add") != nil {
				cb("securityContext.capabilities is %v, want drop: [ALL] and no add", sc["capabilities"])
			}
			if c["stdin"] != true {
				cb("stdin is not true: a stdio server needs its stdin")
			}
			if c["tty"] == true {
				cb("tty: a TTY rewrites the newline-delimited stream")
			}
			if q, ok := quantity(dig(c, "resources", "limits", "cpu")); !ok || q != 1 {
				cb("resources.limits.cpu is %v, want 1", dig(c, "resources", "limits", "cpu"))
			}
			if q, ok := quantity(dig(c, "resources", "limits", "memory")); !ok || q != memoryBytes {
				cb("resources.limits.memory is %v, want 256Mi", dig(c, "resources", "limits", "memory"))
			}

			tmp, data := false, false
			ml, _ := c["volumeMounts"].([]any)
			for _, m := range ml {
				m, _ := m.(map[string]any)
				path, _ := m["mountPath"].(string)
				name, _ := m["name"].(string)
				v := vols[name]
				switch {
				case path == "/tmp":
					size, ok := quantity(dig(v, "emptyDir", "sizeLimit"))
					if dig(v, "emptyDir", "medium") != "Memory" || !ok || size > tmpBytes {
						cb("/tmp is not an emptyDir of medium Memory with a sizeLimit of at most 16Mi")
					} else {
						tmp = true
					}
				case m["readOnly"] != true:
					cb("the mount at %s is not readOnly", path)
				case path == dataDir:
					if pvc, ok := v["persistentVolumeClaim"].(map[string]any); ok && pvc["readOnly"] != true {
						cb("the claim mounted at %s is not readOnly", path)
					} else {
						data = true
					}
				}
			}
			if !tmp {
				cb("no /tmp mount (an emptyDir of medium Memory)")
			}
			if !data {
				cb("no read-only mount at %s", dataDir)
			}

			var env []string
			el, _ := c["env"].([]any)
			for _, e := range el {
				e, _ := e.(map[string]any)
				name, _ := e["name"].(string)
				value, hasValue := e["value"]
				if name == "MCP_SQL_DSN" {
					if hasValue || dig(e, "valueFrom", "secretKeyRef") == nil {
						cb("MCP_SQL_DSN does not come from a Secret (valueFrom.secretKeyRef): never put the DSN in the manifest")
					}
					value = placeholderDSN
				}
				env = append(env, name+"="+fmt.Sprint(value))
			}
			if !slices.Contains(env, "MCP_SAFE_DATA_DIR="+dataDir) {
				cb("MCP_SAFE_DATA_DIR is not %s", dataDir)
			}
			if _, err := loadEnv(env); err != nil {
				cb("bastion serve would not take the configuration as written: %v", err)
			}
		}

		// No network: a NetworkPolicy that selects the pod, governs both
		// directions and allows nothing.
		denied := false
		for _, np := range policies {
			meta, _ := np["metadata"].(map[string]any)
			if meta["namespace"] != pd.ns {
				continue
			}
			sel, _ := dig(np, "spec", "podSelector", "matchLabels").(map[string]any)
			selects := dig(np, "spec", "podSelector") != nil
			for k, v := range sel {
				if pd.labels[k] != v {
					selects = false
				}
			}
			types := stringList(dig(np, "spec", "policyTypes"))
			if selects && slices.Contains(types, "Ingress") && slices.Contains(types, "Egress") &&
				dig(np, "spec", "ingress") == nil && dig(np, "spec", "egress") == nil {
				denied = true
			}
		}
		if !denied {
			pb("no NetworkPolicy in its namespace selects it, governs Ingress and Egress and allows nothing")
		}
	}
	return p
}

// quantity reads the Kubernetes quantities this manifest uses: plain
// numbers, m (milli) and the binary suffixes Ki, Mi, Gi.
func quantity(v any) (float64, bool) {
	if v == nil {
		return 0, false
	}
	s := fmt.Sprint(v)
	mult := 1.0
	for _, x := range []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"m", 1e-3}} {
		if t, ok := strings.CutSuffix(s, x.suffix); ok {
			s, mult = t, x.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	return f * mult, err == nil
}

// ---- helpers ---------------------------------------------------------

func dig(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func stringList(v any) []string {
	var out []string
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
	case string:
		out = append(out, v)
	}
	return out
}

func equalStrings(v any, want []string) bool {
	l, ok := v.([]any)
	return ok && slices.Equal(stringList(l), want)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
