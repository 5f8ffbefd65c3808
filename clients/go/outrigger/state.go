package outrigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// JSONContentType is the content type of JSON state entries (compact; maps with sorted keys).
const JSONContentType = "application/json"

// CycleState is a cycle's CycleState as a plugin sees it in one call: the entries of its declared keys
// (sent with the request), its own writes (sent back on the reply, so they cost no round trip) and
// the framework's CycleState service for other keys (a round trip each: the slow path).
type CycleState struct {
	cycleID, plugin string
	fw              *Framework
	entries         map[string]*pb.StateEntry
	writes          []*pb.StateEntry
}

// NewCycleState is the CycleState a plugin sees in a call of the cycle ctx names (ctx.state: the
// declared keys' entries). The host makes one per call; tests of plugins make their own.
func NewCycleState(ctx *pb.CycleContext, fw *Framework) *CycleState { return newCycleState(ctx, fw) }

func newCycleState(ctx *pb.CycleContext, fw *Framework) *CycleState {
	s := &CycleState{cycleID: ctx.GetCycleId(), plugin: ctx.GetPlugin(), fw: fw, entries: map[string]*pb.StateEntry{}}
	for _, e := range ctx.GetState() {
		s.entries[e.GetKey()] = e
	}
	return s
}

// Get is the entry under key: a declared key as the request brought it, or a key written in this
// call.
func (s *CycleState) Get(key string) (*pb.StateEntry, bool) {
	e, ok := s.entries[key]
	return e, ok
}

// GetJSON decodes the JSON entry under key into v; false when there is none.
func (s *CycleState) GetJSON(key string, v any) (bool, error) {
	e, ok := s.entries[key]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(e.GetValue(), v); err != nil {
		return true, fmt.Errorf("cycle state %q is not the JSON expected: %w", key, err)
	}
	return true, nil
}

// Set writes an entry; it reaches the framework with the reply.
func (s *CycleState) Set(key, contentType string, value []byte) {
	e := &pb.StateEntry{Key: key, ContentType: contentType, Value: value}
	s.entries[key] = e
	s.writes = append(s.writes, e)
}

// SetJSON writes v as a JSON entry.
func (s *CycleState) SetJSON(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("cycle state %q: %w", key, err)
	}
	s.Set(key, JSONContentType, b)
	return nil
}

// Delete removes key (with the reply).
func (s *CycleState) Delete(key string) {
	delete(s.entries, key)
	s.writes = append(s.writes, &pb.StateEntry{Key: key, Deleted: true})
}

// ErrNoFramework says the host does not know the framework's address yet.
var ErrNoFramework = errors.New("no framework to reach: the host has not been handshaken with a framework address")

// Read reads keys of the cycle from the framework's CycleState service (the slow path; keys that do
// not exist are omitted).
func (s *CycleState) Read(ctx context.Context, keys ...string) ([]*pb.StateEntry, error) {
	if s.fw == nil {
		return nil, ErrNoFramework
	}
	ctx, cancel := s.fw.deadline(ctx)
	defer cancel()
	reply, err := s.fw.CycleState.Read(ctx, &pb.ReadStateRequest{CycleId: s.cycleID, Plugin: s.plugin, Keys: keys})
	if err != nil {
		return nil, fmt.Errorf("CycleState.Read at the framework (%s): %w", s.fw.Address, err)
	}
	return reply.GetEntries(), nil
}

// Write writes entries to the cycle at once, through the framework's CycleState service.
func (s *CycleState) Write(ctx context.Context, entries ...*pb.StateEntry) error {
	if s.fw == nil {
		return ErrNoFramework
	}
	ctx, cancel := s.fw.deadline(ctx)
	defer cancel()
	if _, err := s.fw.CycleState.Write(ctx, &pb.WriteStateRequest{CycleId: s.cycleID, Plugin: s.plugin, Entries: entries}); err != nil {
		return fmt.Errorf("CycleState.Write at the framework (%s): %w", s.fw.Address, err)
	}
	return nil
}

// Pending are the writes and deletes that will ride on the reply, in order.
func (s *CycleState) Pending() []*pb.StateEntry { return s.writes }

func (s *CycleState) drain() []*pb.StateEntry {
	w := s.writes
	s.writes = nil
	return w
}
