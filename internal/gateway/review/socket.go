package review

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
)

// maxBody bounds what either side of the socket reads: a ledger of
// 100,000 tools with their descriptors fits.
const maxBody = 512 << 20

// Handler serves s over HTTP: GET /records, GET /records/{name},
// POST /records/{name}/approve {digest, by}, POST /records/{name}/reject
// {by}, POST /records/{name}/forget {by}. Errors are {"error": "..."} with 404 for an unknown name and 409
// for a decision the record does not allow.
func Handler(s Service) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /records", func(w http.ResponseWriter, r *http.Request) {
		recs, err := s.List(r.Context())
		reply(w, recs, err)
	})
	mux.HandleFunc("GET /records/{name}", func(w http.ResponseWriter, r *http.Request) {
		it, err := s.Show(r.Context(), r.PathValue("name"))
		reply(w, it, err)
	})
	mux.HandleFunc("POST /records/{name}/{verb}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Digest string `json:"digest"`
			By     string `json:"by"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "the body is not a JSON object"})
			return
		}
		var err error
		switch r.PathValue("verb") {
		case "approve":
			err = s.Approve(r.Context(), r.PathValue("name"), body.Digest, body.By)
		case "reject":
			err = s.Reject(r.Context(), r.PathValue("name"), body.By)
		case "forget":
			err = s.Forget(r.Context(), r.PathValue("name"), body.By)
		default:
			http.NotFound(w, r)
			return
		}
		reply(w, map[string]bool{"ok": true}, err)
	})
	return mux
}

// conflicts are the errors of a decision the record does not allow,
// answered 409.
var conflicts = []error{admit.ErrNothingPending, admit.ErrDigestMismatch, admit.ErrStillListed, admit.ErrHeld}

func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrNotFound):
			status = http.StatusNotFound
		case slices.ContainsFunc(conflicts, func(c error) bool { return errors.Is(err, c) }):
			status = http.StatusConflict
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

// Client is a Service on a running gateway's socket.
type Client struct {
	hc *http.Client
}

// Dial returns a client of the socket at path, or an error when no
// gateway answers there (none runs, or a stale socket of one that died).
func Dial(ctx context.Context, path string) (*Client, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	_ = conn.Close()
	return &Client{hc: &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", path) },
	}}}, nil
}

// List implements Service.
func (c *Client) List(ctx context.Context) ([]admit.Record, error) {
	var recs []admit.Record
	return recs, c.do(ctx, http.MethodGet, "/records", nil, &recs)
}

// Show implements Service.
func (c *Client) Show(ctx context.Context, name string) (Item, error) {
	var it Item
	return it, c.do(ctx, http.MethodGet, "/records/"+url.PathEscape(name), nil, &it)
}

// Approve implements Service.
func (c *Client) Approve(ctx context.Context, name, digest, by string) error {
	return c.do(ctx, http.MethodPost, "/records/"+url.PathEscape(name)+"/approve", map[string]string{"digest": digest, "by": by}, nil)
}

// Reject implements Service.
func (c *Client) Reject(ctx context.Context, name, by string) error {
	return c.do(ctx, http.MethodPost, "/records/"+url.PathEscape(name)+"/reject", map[string]string{"by": by}, nil)
}

// Forget implements Service.
func (c *Client) Forget(ctx context.Context, name, by string) error {
	return c.do(ctx, http.MethodPost, "/records/"+url.PathEscape(name)+"/forget", map[string]string{"by": by}, nil)
}

func (c *Client) do(ctx context.Context, method, path string, body, dst any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://gateway"+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("review: the gateway's socket: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("review: the gateway's socket: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		_ = json.Unmarshal(data, &e)
		err := errors.New(e.Error)
		switch resp.StatusCode {
		case http.StatusNotFound:
			err = fmt.Errorf("%s: %w", e.Error, ErrNotFound)
			if e.Error == "" {
				// Not this package's answer: the route is unknown.
				err = fmt.Errorf("review: the running gateway does not know %s %s (is it an older version than this command?)", method, strings.TrimPrefix(path, "/records/"))
			}
		case http.StatusConflict:
			// The same message, wrapping the decision's own error.
			for _, sentinel := range conflicts {
				if prefix, ok := strings.CutSuffix(e.Error, sentinel.Error()); ok {
					err = fmt.Errorf("%s%w", prefix, sentinel)
				}
			}
		}
		return err
	}
	if dst == nil {
		return nil
	}
	return json.Unmarshal(data, dst)
}

// Serve serves s on a Unix socket at path (mode 0600) until ctx ends. A
// stale socket file is replaced: the caller holds the ledger's lock, so
// no other gateway serves this state directory.
func Serve(ctx context.Context, path string, s Service) error {
	_ = removeSocket(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("review: %w", err)
	}
	if err := chmod(path); err != nil {
		_ = ln.Close()
		return err
	}
	srv := &http.Server{Handler: Handler(s), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err = srv.Serve(ln)
	<-done
	_ = removeSocket(path)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
