package outrigger

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// signer filters nothing and signs a pod by its name: "refused" cannot be signed, "nokey" and "nan"
// answer bad fragments.
type signer struct{}

func (signer) Name() string                            { return "S" }
func (signer) Filter(*Call, *pb.Pod, []Node) []*Status { return nil }
func (signer) SignPod(_ *Call, pod *pb.Pod) ([]SignFragment, *Status) {
	switch pod.GetMetadata().GetName() {
	case "refused":
		return nil, NewStatus(Unschedulable, "has claims")
	case "nokey":
		return []SignFragment{{Value: 1}}, nil
	case "nan":
		return []SignFragment{{Key: "k", Value: math.NaN()}}, nil
	}
	return []SignFragment{{Key: "v1.Pod.Spec.Tolerations", Value: []map[string]any{{"b": 2, "a": []any{1, "x"}}}},
		{Key: "v1.Pod.Spec.NodeName", Value: ""}}, nil
}

// reservesAndSigns signs but has no point it signs for.
type reservesAndSigns struct{}

func (reservesAndSigns) Name() string                                     { return "R" }
func (reservesAndSigns) SignPod(*Call, *pb.Pod) ([]SignFragment, *Status) { return nil, nil }

func (reservesAndSigns) Reserve(*Call, *pb.Pod, string) *Status { return nil }
func (reservesAndSigns) Unreserve(*Call, *pb.Pod, string)       {}

func TestSignIsDeclaredWithAPointItSignsFor(t *testing.T) {
	want := []pb.ExtensionPoint{pb.ExtensionPoint_EXTENSION_POINT_FILTER, pb.ExtensionPoint_EXTENSION_POINT_SIGN}
	if got := pointsOf(signer{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("points = %v, want %v", got, want)
	}
	_, err := NewHost([]Registration{{Name: "R",
		Factory: func(json.RawMessage, *Env) (Plugin, error) { return reservesAndSigns{}, nil }}}, Options{})
	if want := "plugin R: Sign needs PreFilter, Filter, PreScore or Score (the points it signs for)"; err == nil || err.Error() != want {
		t.Fatalf("NewHost error = %v, want %q", err, want)
	}
}

func TestSignPodAnswersFragmentsAsJSON(t *testing.T) {
	h, err := NewHost([]Registration{{Name: "S",
		Factory: func(json.RawMessage, *Env) (Plugin, error) { return signer{}, nil }}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.Configure(ctx, &pb.ConfigureRequest{Plugin: "S", Profile: "p"}); err != nil {
		t.Fatal(err)
	}
	ask := func(name string) *pb.SignReply {
		reply, err := h.SignPod(ctx, &pb.PodRequest{Plugin: "S", Profile: "p", Pod: &pb.Pod{Metadata: &pb.ObjectMeta{Name: name}}})
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	type frag struct{ key, value string }
	var got []frag
	signed := ask("p0")
	for _, f := range signed.GetFragments() {
		got = append(got, frag{f.GetKey(), string(f.GetValueJson())})
	}
	want := []frag{{"v1.Pod.Spec.Tolerations", `[{"a":[1,"x"],"b":2}]`}, {"v1.Pod.Spec.NodeName", `""`}}
	if signed.GetStatus().GetCode() != pb.Code_CODE_SUCCESS || !reflect.DeepEqual(got, want) {
		t.Errorf("signed = %v %v, want success %v", signed.GetStatus(), got, want)
	}
	cases := []struct {
		pod    string
		code   pb.Code
		reason string
	}{
		{"refused", pb.Code_CODE_UNSCHEDULABLE, "has claims"},
		{"nokey", pb.Code_CODE_ERROR, "sign fragment 0 has no key"},
		{"nan", pb.Code_CODE_ERROR, `sign fragment "k": json: unsupported value: NaN`},
	}
	for _, c := range cases {
		reply := ask(c.pod)
		if reply.GetStatus().GetCode() != c.code || !reflect.DeepEqual(reply.GetStatus().GetReasons(), []string{c.reason}) ||
			len(reply.GetFragments()) != 0 {
			t.Errorf("%s: reply = %v, want %v %q and no fragments", c.pod, reply, c.code, c.reason)
		}
	}
}
