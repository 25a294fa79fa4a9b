package protocol

import (
	"encoding/json"
	"math"
)

// Task payloads: the assignment, execution and answer of work between agents
// (reference chapter "Task-Nachrichten"). Credits offered for a task travel in
// the CREDITS header of task.assign, not in its body (Message.Credits).

// priorityMax bounds a task priority. The reference uses small integers (2,
// 3) without saying which end is urgent; the bound only keeps the value sane.
const priorityMax = 1000

// TaskAssign is task.assign: an owner asks a worker to do a task. The
// reference body has no task_id (the worker answers with one in task.result),
// so task_id is optional here.
type TaskAssign struct {
	TaskID string `json:"task_id,omitempty"`
	// Task names the capability asked for, e.g. "data.analyze".
	Task     string `json:"task"`
	Priority *int64 `json:"priority,omitempty"`
	// Payload is the task's input, kept as received for the worker.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Validate requires task; priority, if given, is 0 to 1000; payload, if given,
// is an object.
func (p *TaskAssign) Validate() error {
	var c fieldCheck
	c.id("task_id", p.TaskID, false)
	c.text("task", p.Task)
	c.integer("priority", p.Priority, false, 0, priorityMax)
	c.object("payload", p.Payload, false)
	return c.result()
}

// TaskResult is task.result: the worker's answer after doing a task.
type TaskResult struct {
	TaskID string `json:"task_id"`
	// Status is the outcome as the worker words it, e.g. "SUCCESS". The
	// reference names no other value, so none is refused.
	Status string `json:"status"`
	// Duration is in seconds. It is not money, so a float64 is exact enough.
	Duration *float64 `json:"duration,omitempty"`
	// Result is the task's output, any JSON value, kept as received.
	Result json.RawMessage `json:"result,omitempty"`
}

// Validate requires task_id and status; duration, if given, is not negative.
func (p *TaskResult) Validate() error {
	var c fieldCheck
	c.id("task_id", p.TaskID, true)
	c.text("status", p.Status)
	if p.Duration != nil && !(*p.Duration >= 0 && *p.Duration <= math.MaxFloat64) {
		c.failf("field %q must not be negative", "duration")
	}
	return c.result()
}

// TaskReject is task.reject: the worker will not do a task.
type TaskReject struct {
	TaskID    string    `json:"task_id"`
	Reason    string    `json:"reason"`
	Timestamp Timestamp `json:"timestamp,omitzero"`
}

// Validate requires task_id and reason: a refusal without a reason leaves the
// owner nothing to act on.
func (p *TaskReject) Validate() error {
	var c fieldCheck
	c.id("task_id", p.TaskID, true)
	c.text("reason", p.Reason)
	return c.result()
}

// TaskRetry is task.retry: the owner sends a task again, e.g. after a
// timeout.
type TaskRetry struct {
	OriginalTaskID string `json:"original_task_id"`
	// Attempt counts tries, the first being 1, so a retry bounds how often
	// a task may bounce.
	Attempt  *int64 `json:"attempt"`
	Reason   string `json:"reason,omitempty"`
	Priority *int64 `json:"priority,omitempty"`
}

// Validate requires original_task_id and an attempt of at least 1.
func (p *TaskRetry) Validate() error {
	var c fieldCheck
	c.id("original_task_id", p.OriginalTaskID, true)
	c.integer("attempt", p.Attempt, true, 1, math.MaxInt32)
	c.integer("priority", p.Priority, false, 0, priorityMax)
	return c.result()
}

// TaskCancel is task.cancel: the owner withdraws a task.
type TaskCancel struct {
	TaskID    string    `json:"task_id"`
	Reason    string    `json:"reason,omitempty"`
	Timestamp Timestamp `json:"timestamp,omitzero"`
}

// Validate requires task_id.
func (p *TaskCancel) Validate() error {
	var c fieldCheck
	c.id("task_id", p.TaskID, true)
	return c.result()
}
