package outrigger

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// tally is a plugin with state of its own: the instances built and the stops each got.
type tally struct {
	id    int
	stops *[]int
}

func (tally) Name() string                              { return "T" }
func (t tally) Filter(*Call, *pb.Pod, []Node) []*Status { return nil }
func (t tally) Stop(string)                             { *t.stops = append(*t.stops, t.id) }

// The framework handshakes and configures a host again after any failed call (a slow one too): the
// same args keep the instance and its state; other args, or a stop in between, build it again.
func TestConfigureAgainWithTheSameArgsKeepsTheInstance(t *testing.T) {
	cases := []struct {
		name        string
		second      string
		stopBetween bool
		built       int
		stops       []int
	}{
		{"same args", `{"n": 1, "calls": "x"}`, false, 1, nil},
		{"same args spelled otherwise", ` {"calls":"x","n":1.0} `, false, 1, nil},
		{"new args", `{"n": 2, "calls": "x"}`, false, 2, []int{1}},
		{"stopped in between", `{"n": 1, "calls": "x"}`, true, 2, []int{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			built, stops := 0, []int{}
			h, err := NewHost([]Registration{{Name: "T", Factory: func(json.RawMessage, *Env) (Plugin, error) {
				built++
				return tally{id: built, stops: &stops}, nil
			}}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			probed := built // NewHost builds one to read the plugin's points
			ctx := context.Background()
			for i, args := range []string{`{"n": 1, "calls": "x"}`, tc.second} {
				if i == 1 && tc.stopBetween {
					if _, err := h.Stop(ctx, &pb.StopRequest{Profile: "p", Reason: "lost the lease"}); err != nil {
						t.Fatal(err)
					}
				}
				reply, err := h.Configure(ctx, &pb.ConfigureRequest{Plugin: "T", Profile: "p", ArgsJson: args})
				if err != nil || reply.GetStatus().GetCode() != pb.Code_CODE_SUCCESS {
					t.Fatalf("Configure(%s) = %v, %v", args, reply, err)
				}
			}
			if built-probed != tc.built {
				t.Fatalf("instances built = %d, want %d", built-probed, tc.built)
			}
			want := []int{}
			for _, id := range tc.stops {
				want = append(want, id+probed)
			}
			if !reflect.DeepEqual(stops, want) {
				t.Fatalf("stops = %v, want %v", stops, want)
			}
		})
	}
}
