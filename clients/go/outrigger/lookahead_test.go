package outrigger

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"testing"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

func TestScoresArePackedInTheNarrowestWidth(t *testing.T) {
	cases := []struct {
		scores []int64
		width  uint32
		bytes  []byte
	}{
		{[]int64{0, 100, -5}, 1, []byte{0, 100, 251}},
		{[]int64{300, 0}, 2, []byte{44, 1, 0, 0}},
		{[]int64{1 << 20}, 4, []byte{0, 0, 16, 0}},
		{[]int64{1 << 40}, 8, []byte{0, 0, 0, 0, 0, 1, 0, 0}},
		{nil, 1, []byte{}},
	}
	for _, c := range cases {
		b, w := packScores(c.scores)
		if w != c.width || !reflect.DeepEqual(b, c.bytes) {
			t.Errorf("packScores(%v) = %v width %d, want %v width %d", c.scores, b, w, c.bytes, c.width)
		}
	}
}

// twoReasons rejects node ids 2 and 4 with different reasons and scores every node 10*id.
type twoReasons struct{}

func (twoReasons) Name() string { return "Two" }
func (twoReasons) Filter(_ *Call, _ *pb.Pod, nodes []Node) []*Status {
	out := make([]*Status, len(nodes))
	for i, n := range nodes {
		switch n.ID {
		case 2:
			out[i] = NewStatus(Unschedulable, "two")
		case 4:
			out[i] = NewStatus(UnschedulableAndUnresolvable, "four")
		}
	}
	return out
}
func (twoReasons) Score(_ *Call, _ *pb.Pod, nodes []Node) ([]int64, error) {
	out := make([]int64, len(nodes))
	for i, n := range nodes {
		out[i] = 10 * int64(n.ID)
	}
	return out, nil
}

func TestLookaheadAnswersEveryNodeColumnwise(t *testing.T) {
	h, err := NewHost([]Registration{{Name: "Two", Lookahead: true,
		Factory: func(json.RawMessage, *Env) (Plugin, error) { return twoReasons{}, nil }}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := h.plugins[0].manifest; !m.GetLookahead() || !m.GetNodesOnly() || !m.GetNeedsSnapshot() {
		t.Fatalf("manifest %v", m)
	}
	if _, err := h.Configure(context.Background(), &pb.ConfigureRequest{Plugin: "Two", Profile: "p"}); err != nil {
		t.Fatal(err)
	}
	d := &pb.SnapshotDelta{Generation: 3, FullResync: true, NodeGeneration: 3}
	for id := uint32(1); id <= 4; id++ {
		d.Nodes = append(d.Nodes, &pb.NodeUpsert{Id: id, Node: node(string(rune('a'+id-1)), nil)})
	}
	h.mirror.Apply(d)
	reply := h.lookahead(context.Background(), &pb.LookaheadRequest{Seq: 7, Plugin: "Two", Profile: "p", NodeGeneration: 3,
		Filter: true, Score: true, Pods: []*pb.Pod{{Metadata: &pb.ObjectMeta{Uid: "u1"}}}})
	if reply.GetError() != nil || reply.GetSeq() != 7 || reply.GetGeneration() != 3 {
		t.Fatalf("reply %v", reply)
	}
	ids := []uint32{}
	for i := 0; i < len(reply.NodeIds); i += 4 {
		ids = append(ids, binary.LittleEndian.Uint32(reply.NodeIds[i:]))
	}
	v := reply.Verdicts[0]
	index := []uint32{}
	for i := 0; i < len(v.ReasonIndex); i += 4 {
		index = append(index, binary.LittleEndian.Uint32(v.ReasonIndex[i:]))
	}
	got := []any{ids, v.Uid, v.Codes, len(v.ReasonTable), v.ReasonTable[0].Reasons, v.ReasonTable[1].Reasons, index, v.Scores, v.ScoreWidth}
	want := []any{[]uint32{1, 2, 3, 4}, "u1", []byte{0, 2, 0, 3}, 2, []string{"two"}, []string{"four"}, []uint32{0, 0, 0, 1},
		[]byte{10, 0, 30, 0}, uint32(1)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("verdict %v, want %v", got, want)
	}
	// A plugin that did not declare lookahead, or a profile not configured: the request's error.
	reply = h.lookahead(context.Background(), &pb.LookaheadRequest{Seq: 8, Plugin: "Two", Profile: "other"})
	if got := reply.GetError().GetReasons(); len(got) != 1 || got[0] != `plugin Two is not configured for profile "other"` {
		t.Errorf("unconfigured: %v", got)
	}
}
