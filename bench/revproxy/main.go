// Command revproxy is a benchmark-only HTTP reverse proxy: the standard
// library's httputil.ReverseProxy in front of one URL, and nothing else.
//
// It is the floor of the gateway benchmark (bench/run-gateway-load.sh): the
// "proxy" target calls bench/echohttp through it, in the same rounds as the
// direct calls and the calls through bastion gateway. What it adds over the
// direct calls is the price of one more HTTP/1.1 hop on the machine (a
// served request and a made one, over loopback, on net/http), which any HTTP
// gateway pays before it does any work of its own. What the gateway adds
// over it is then the gateway's own work. It reads nothing of the messages,
// checks nothing and must never be deployed.
//
// Its outgoing transport is configured as the gateway's (no environment
// proxy, keep-alive connections, up to 64 idle per host), so the two hops
// differ only in what runs between the served and the made request.
//
// Usage:
//
//	revproxy -to URL [-addr 127.0.0.1:0]
//
// It prints "LISTEN <url>" on stdout (the URL with its path, on the proxy's
// address) once it accepts connections, and serves until SIGINT or SIGTERM,
// then shuts down (at most 5 s) and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("revproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (host:port; port 0 picks a free one)")
	to := fs.String("to", "", "the URL to forward to (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *to == "" {
		fmt.Fprintln(stderr, "revproxy: -to URL is required, and nothing else")
		return 2
	}
	target, err := url.Parse(*to)
	if err != nil || target.Scheme != "http" || target.Host == "" {
		fmt.Fprintln(stderr, "revproxy: -to must be an http:// URL")
		return 2
	}

	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = target.Scheme
			r.Out.URL.Host = target.Host
			r.Out.URL.Path = target.Path
			r.Out.Host = target.Host
		},
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		},
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "revproxy: %v\n", err)
		return 1
	}
	hs := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "LISTEN http://%s%s\n", ln.Addr(), target.Path)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case err := <-served:
		fmt.Fprintf(stderr, "revproxy: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "revproxy: shutdown: %v\n", err)
		return 1
	}
	return 0
}
