package outrigger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	grpcstatus "google.golang.org/grpc/status"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// Lookahead answers Filter and Score for pods ahead of their cycles, over every node of the mirror, for
// plugins registered with Lookahead: one reply per request, in order. A failure answers that request
// (or that pod) with an error status, never a torn stream; the framework then calls Filter/Score in
// the pod's cycle.
func (h *Host) Lookahead(stream pb.Plugin_LookaheadServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(h.lookahead(stream.Context(), req)); err != nil {
			return err
		}
	}
}

func (h *Host) lookahead(ctx context.Context, req *pb.LookaheadRequest) *pb.LookaheadReply {
	reply := &pb.LookaheadReply{Seq: req.GetSeq()}
	fail := func(err error) *pb.LookaheadReply {
		if st, ok := grpcstatus.FromError(err); ok {
			err = errors.New(st.Message())
		}
		reply.Error = AsStatus(err).ToProto()
		return reply
	}
	hp, inst, err := h.instance(req.GetPlugin(), req.GetProfile())
	if err != nil {
		return fail(err)
	}
	if !hp.reg.Lookahead {
		return fail(fmt.Errorf("plugin %s did not declare lookahead", hp.reg.Name))
	}
	snap, err := h.mirror.WaitUntil(ctx, req.GetNodeGeneration(), waitBudget(ctx))
	if err != nil {
		return fail(err)
	}
	reply.Generation = snap.Generation
	states := snap.Nodes()
	nodes := make([]Node, len(states))
	ids := make([]byte, 4*len(states))
	for i, n := range states {
		nodes[i] = Node{ID: n.ID, Name: n.Name(), State: n}
		binary.LittleEndian.PutUint32(ids[4*i:], n.ID)
	}
	reply.NodeIds = ids
	work := &scratch{}
	for _, pod := range req.GetPods() {
		call := &Call{Context: ctx, Point: "Lookahead", Plugin: hp.reg.Name, Profile: req.GetProfile(),
			State: newCycleState(&pb.CycleContext{Plugin: hp.reg.Name}, h.framework()), Snapshot: snap, Framework: h.framework()}
		verdict := &pb.PodVerdict{Uid: pod.GetMetadata().GetUid()}
		if st := guard("Lookahead of plugin "+hp.reg.Name, func() *Status {
			return fillVerdict(inst, call, pod, nodes, verdict, req.GetFilter(), req.GetScore(), work)
		}); st != nil {
			verdict = &pb.PodVerdict{Uid: pod.GetMetadata().GetUid(), Error: st.ToProto()}
		}
		reply.Verdicts = append(reply.Verdicts, verdict)
	}
	return reply
}

// scratch are the per-node buffers of one request's verdicts, reused from pod to pod (a request asks
// for dozens of pods over every node: allocating them per pod is what the host's time would go to).
type scratch struct {
	index   []uint32
	passed  []bool
	passing []Node
	scores  []int64
}

func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	buf = buf[:n]
	clear(buf)
	return buf
}

// fillVerdict is one pod's answers over every node, as PodVerdict's columns.
func fillVerdict(inst Plugin, call *Call, pod *pb.Pod, nodes []Node, v *pb.PodVerdict, filter, score bool, work *scratch) *Status {
	passing := nodes
	var passed []bool
	if filter {
		fp, ok := inst.(FilterPlugin)
		if !ok {
			return missing("Filter")
		}
		statuses := fp.Filter(call, pod, nodes)
		if len(statuses) != len(nodes) {
			return AsStatus(fmt.Errorf("Filter answered %d of %d nodes", len(statuses), len(nodes)))
		}
		codes := make([]byte, len(nodes))
		work.index = grow(work.index, len(nodes))
		work.passed = grow(work.passed, len(nodes))
		index, table := work.index, map[string]uint32{}
		passed = work.passed
		passing = work.passing[:0]
		for i, s := range statuses {
			if s.IsSuccess() {
				passed[i] = true
				passing = append(passing, nodes[i])
				continue
			}
			codes[i] = byte(s.Code)
			text := strings.Join(s.Reasons, "\x00")
			j, seen := table[text]
			if !seen {
				j = uint32(len(v.ReasonTable))
				table[text] = j
				v.ReasonTable = append(v.ReasonTable, &pb.ReasonSet{Reasons: s.Reasons})
			}
			index[i] = j
		}
		work.passing = passing
		v.Codes = codes
		if len(v.ReasonTable) > 1 { // one reason set needs no index
			v.ReasonIndex = make([]byte, 4*len(nodes))
			for i, j := range index {
				binary.LittleEndian.PutUint32(v.ReasonIndex[4*i:], j)
			}
		}
	}
	if !score {
		return nil
	}
	sp, ok := inst.(ScorePlugin)
	if !ok {
		return missing("Score")
	}
	got, err := scoresOf(sp, call, pod, passing)
	if err != nil {
		return AsStatus(err)
	}
	work.scores = grow(work.scores, len(nodes))
	scores := work.scores
	if passed == nil {
		copy(scores, got)
	} else {
		j := 0
		for i := range nodes {
			if passed[i] {
				scores[i] = got[j]
				j++
			}
		}
	}
	v.Scores, v.ScoreWidth = packScores(scores)
	return nil
}

// packScores writes scores as little-endian integers of the narrowest width that holds them all.
func packScores(scores []int64) ([]byte, uint32) {
	lo, hi := int64(0), int64(0)
	for _, s := range scores {
		lo, hi = min(lo, s), max(hi, s)
	}
	switch {
	case lo >= math.MinInt8 && hi <= math.MaxInt8:
		out := make([]byte, len(scores))
		for i, s := range scores {
			out[i] = byte(int8(s))
		}
		return out, 1
	case lo >= math.MinInt16 && hi <= math.MaxInt16:
		out := make([]byte, 2*len(scores))
		for i, s := range scores {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(int16(s)))
		}
		return out, 2
	case lo >= math.MinInt32 && hi <= math.MaxInt32:
		out := make([]byte, 4*len(scores))
		for i, s := range scores {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(int32(s)))
		}
		return out, 4
	}
	out := make([]byte, 8*len(scores))
	for i, s := range scores {
		binary.LittleEndian.PutUint64(out[8*i:], uint64(s))
	}
	return out, 8
}
