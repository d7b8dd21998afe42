package session

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/problem"
)

// replier answers one request: straight onto the stream, or into the
// batch the request arrived in. Every request of a batch must be answered
// exactly once, with send(nil) when it gets no response (a cancelled
// call), so that the batch knows when it is complete.
type replier struct {
	ss *Session
	m  *batchMember // nil: not in a batch
}

// send writes msg, or, in a batch, adds it to the batch's answer. A nil
// msg is no response.
func (r replier) send(msg []byte) {
	if r.m != nil {
		r.m.answer(msg)
		return
	}
	if msg != nil {
		r.ss.send(msg)
	}
}

func (r replier) sendError(e *jsonrpc.Error) {
	r.send(jsonrpc.AppendError(nil, e))
}

// batch collects the responses to the requests of one JSON-RPC batch and
// writes them as one array once each has its answer, in the order the
// answers came (JSON-RPC 2.0 §6 allows any order). A batch whose requests
// all went unanswered (cancelled calls) writes nothing, as does one that
// held only notifications. A member's call stays in the session's
// inflight map until its batch is queued for writing, so that held
// answers count against the pending cap and can still be cancelled; the
// bytes of held answers count against the session's MaxBatchBytes.
type batch struct {
	ss *Session

	mu      sync.Mutex
	pending int // members without an answer, plus one until dispatched
	answers []answer
	held    int // bytes of answers counted in the session's batchBytes
}

// answer is one member's response; for a tools/call, with the call, which
// stays in the session's inflight map until the batch is written.
type answer struct {
	msg  []byte
	id   jsonrpc.ID
	call *call // nil for answers that are not of a started call
}

func newBatch(ss *Session) *batch {
	return &batch{ss: ss, pending: 1}
}

// batchMember is one request of a batch. Its first answer counts; a
// second (a bug) is dropped rather than corrupting the count.
type batchMember struct {
	b        *batch
	id       jsonrpc.ID
	answered atomic.Bool
}

// member returns the replier of the batch's next request, of id.
func (b *batch) member(id jsonrpc.ID) replier {
	b.mu.Lock()
	b.pending++
	b.mu.Unlock()
	return replier{ss: b.ss, m: &batchMember{b: b, id: id}}
}

func (m *batchMember) answer(msg []byte) {
	if !m.answered.CompareAndSwap(false, true) {
		return
	}
	m.b.settle(answer{msg: msg, id: m.id})
}

// answerCall is answer for a started tools/call, identified by id, whose
// place in the session's inflight map the batch releases when it is
// written.
func (m *batchMember) answerCall(id jsonrpc.ID, c *call, msg []byte) {
	if !m.answered.CompareAndSwap(false, true) {
		return
	}
	m.b.settle(answer{msg: msg, id: id, call: c})
}

// dispatched tells the batch that every member has been handed out.
func (b *batch) dispatched() { b.settle(answer{}) }

func (b *batch) settle(a answer) {
	if a.msg != nil {
		a.msg = b.hold(a.id, a.msg)
	}
	b.mu.Lock()
	if a.msg != nil || a.call != nil {
		b.answers = append(b.answers, a)
	}
	b.pending--
	done := b.pending == 0
	answers := b.answers
	b.mu.Unlock()
	if !done {
		return
	}
	// One the client cancelled after it finished, while its answer
	// waited here, is left out.
	var msgs [][]byte
	n := 2
	ss := b.ss
	ss.mu.Lock()
	for _, a := range answers {
		if a.call != nil && a.call.peerCancelled {
			continue
		}
		if a.msg != nil {
			msgs = append(msgs, a.msg)
			n += len(a.msg) + 1
		}
	}
	ss.mu.Unlock()
	// The calls leave inflight only once the array has its place in the
	// output queue, and before the client can read it: until then they
	// count against the pending cap, so a client that stops reading
	// cannot have more than MaxPending answers waiting, and a client
	// that answers at once is not judged against them. Their bytes leave
	// the session's batch bound with them.
	left := false
	leave := func() bool {
		if left {
			return true
		}
		left = true
		ss.mu.Lock()
		for _, a := range answers {
			if a.call != nil {
				delete(ss.inflight, a.id)
			}
		}
		ss.batchBytes -= b.held
		ss.mu.Unlock()
		return true
	}
	if len(msgs) == 0 {
		leave()
		return
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	// The array is now the only copy the bound counts: the members'
	// own bytes are let go.
	msgs = nil
	for i := range answers {
		answers[i].msg = nil
	}
	ss.sendQueued(ss.writeCtx, append(out, ']'), leave)
	leave() // not queued: the output ended
}

// hold counts msg, the answer to member id, against the session's bound
// on the bytes held for batches, and returns it; or, when it would pass
// the bound, returns the small error that answers id instead. Answers
// are held until the whole array is queued, so without a bound one batch
// of 64 reads of a 1 MiB file held 384 MiB.
func (b *batch) hold(id jsonrpc.ID, msg []byte) []byte {
	ss := b.ss
	limit := ss.srv.opts.MaxBatchBytes
	ss.mu.Lock()
	fits := ss.batchBytes+len(msg) <= limit
	if fits {
		ss.batchBytes += len(msg)
	}
	ss.mu.Unlock()
	if fits {
		b.mu.Lock()
		b.held += len(msg)
		b.mu.Unlock()
		return msg
	}
	ss.log.Warn("batch answer over the bound replaced by an error", slog.String("id", id.String()),
		slog.Int("answer_bytes", len(msg)), slog.Int("max_batch_bytes", limit))
	pr := problem.New(problem.PayloadTooLarge, fmt.Sprintf(
		"the answer (%d bytes) would pass the %d bytes this session holds for answers to its batches; send the request outside a batch",
		len(msg), limit))
	return jsonrpc.AppendError(nil, &jsonrpc.Error{ID: id, Code: pr.RPCCode(),
		Message: "Payload too large: the answer does not fit the batch bound", Data: mcp.ProblemData(pr)})
}
