package bridge

import (
	"container/heap"
	"time"

	"github.com/aglx/ledger/events"
)

// retryItem is a message whose delivery failed and will be tried again.
type retryItem struct {
	env      *events.Envelope
	attempts int
	due      time.Time
	// addr is the address the last attempt failed at, "" if none did;
	// the relay bounds the retries queued per address.
	addr string
}

// retryQueue orders the messages waiting for another attempt by when it
// is due. It is bounded by relayPendingMax through the relay, which stops
// taking new messages while it is full.
type retryQueue struct{ items retryHeap }

func newRetryQueue() *retryQueue { return &retryQueue{} }

func (q *retryQueue) len() int           { return len(q.items) }
func (q *retryQueue) push(it *retryItem) { heap.Push(&q.items, it) }
func (q *retryQueue) pop() *retryItem    { return heap.Pop(&q.items).(*retryItem) }
func (q *retryQueue) peek() *retryItem   { return q.items[0] }
func (q *retryQueue) nextDue() time.Time { return q.items[0].due }

// minSeq is the lowest sequence waiting: the relay's cursor may not pass
// it, so that a restart tries it again.
func (q *retryQueue) minSeq() uint64 {
	m := q.items[0].env.Seq
	for _, it := range q.items[1:] {
		m = min(m, it.env.Seq)
	}
	return m
}

// retryHeap is a min-heap by due time, ties by sequence, for a stable
// order.
type retryHeap []*retryItem

func (h retryHeap) Len() int { return len(h) }
func (h retryHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].env.Seq < h[j].env.Seq
}
func (h retryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)   { *h = append(*h, x.(*retryItem)) }
func (h *retryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
