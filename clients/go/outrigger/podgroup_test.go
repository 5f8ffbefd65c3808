package outrigger

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// racks generates one placement per rack (the node name's prefix before "-") and scores a placement
// by how many pods share its first pod's node, times 10; normalization halves the scores.
type racks struct{}

func (racks) Name() string { return "R" }
func (racks) GeneratePlacements(c *Call, g *PodGroupInfo, parent Placement) ([]Placement, *Status) {
	var out []Placement
	index := map[string]int{}
	for _, n := range parent.Nodes {
		rack, _, _ := strings.Cut(n, "-")
		i, ok := index[rack]
		if !ok {
			i = len(out)
			index[rack] = i
			out = append(out, Placement{Name: rack})
		}
		out[i].Nodes = append(out[i].Nodes, n)
	}
	c.State.Set("R/groups", "application/json", []byte(`"`+g.Namespace+"/"+g.Name+":"+strings.Join(g.TopologyKeys, ",")+`"`))
	return out, nil
}
func (racks) ScorePlacement(c *Call, g *PodGroupInfo, p Placement, proposed []ProposedAssignment) (int64, *Status) {
	var same int64
	for _, a := range proposed {
		if a.NodeName == proposed[0].NodeName {
			same++
		}
	}
	return same * 10, nil
}
func (racks) NormalizePlacementScore(c *Call, g *PodGroupInfo, placements []string, scores []int64) *Status {
	for i := range scores {
		scores[i] /= 2
	}
	return nil
}

func TestPodGroupPointsAreDeclaredAndServed(t *testing.T) {
	plugin := racks{}
	want := []pb.ExtensionPoint{pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_GENERATE,
		pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_SCORE, pb.ExtensionPoint_EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE}
	if got := pointsOf(plugin); !reflect.DeepEqual(got, want) {
		t.Fatalf("points = %v, want %v", got, want)
	}
	h, err := NewHost([]Registration{{Name: "R",
		Factory: func(json.RawMessage, *Env) (Plugin, error) { return plugin, nil }}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Configure(context.Background(), &pb.ConfigureRequest{Plugin: "R", Profile: "p"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods := []*pb.Pod{{Metadata: &pb.ObjectMeta{Name: "p0"}}, {Metadata: &pb.ObjectMeta{Name: "p1"}}}
	group := &pb.PodGroupContext{GroupCycleId: "g1", Plugin: "R", Profile: "p", Namespace: "ns", Name: "g",
		TopologyKeys: []string{"rack", "zone"}, Pods: pods}

	gen, err := h.GeneratePlacements(ctx, &pb.GeneratePlacementsRequest{Ctx: group,
		Parent: &pb.PlacementNodes{NodeNames: []string{"a-1", "b-1", "a-2"}}})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, p := range gen.GetPlacements() {
		got = append(got, append([]string{p.GetName()}, p.GetNodeNames()...))
	}
	if want := [][]string{{"a", "a-1", "a-2"}, {"b", "b-1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("placements = %v, want %v", got, want)
	}
	if w := gen.GetStateWrites(); len(w) != 1 || w[0].GetKey() != "R/groups" || string(w[0].GetValue()) != `"ns/g:rack,zone"` {
		t.Errorf("state writes = %v, want R/groups = \"ns/g:rack,zone\"", w)
	}

	score, err := h.ScorePlacement(ctx, &pb.ScorePlacementRequest{Ctx: group, PlacementCycleId: "g1/placement/a",
		Placement:   &pb.PlacementNodes{Name: "a", NodeNames: []string{"a-1", "a-2"}},
		Assignments: []*pb.PlacementAssignment{{Pod: 0, NodeName: "a-1"}, {Pod: 1, NodeName: "a-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if score.GetScore() != 20 || score.GetStatus().GetCode() != pb.Code_CODE_SUCCESS {
		t.Errorf("score = %d (%v), want 20 (success)", score.GetScore(), score.GetStatus().GetCode())
	}
	bad, err := h.ScorePlacement(ctx, &pb.ScorePlacementRequest{Ctx: group,
		Placement: &pb.PlacementNodes{Name: "a"}, Assignments: []*pb.PlacementAssignment{{Pod: 5, NodeName: "a-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if bad.GetStatus().GetCode() != pb.Code_CODE_ERROR || !strings.Contains(bad.GetStatus().GetReasons()[0], "pod 5 of 2") {
		t.Errorf("out-of-range pod: status = %v, want an error naming pod 5 of 2", bad.GetStatus())
	}

	norm, err := h.NormalizePlacementScore(ctx, &pb.NormalizePlacementScoreRequest{Ctx: group,
		Placements: []string{"a", "b"}, Scores: []int64{20, 10}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(norm.GetScores(), []int64{10, 5}) {
		t.Errorf("normalized = %v, want [10 5]", norm.GetScores())
	}
}
