package outrigger

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// evictAll asks once to schedule the group without the pod "v" (uid uid-v on node n1); if the group
// then fits, v is the victim and each pod is nominated where that run put it. stranger nominates a
// pod that is not the group's.
type evictAll struct{ stranger bool }

func (evictAll) Name() string { return "E" }
func (e evictAll) PodGroupPostFilter(c *Call, g *PodGroupInfo, schedule PodGroupSchedulingFunc) (*PodGroupPostFilterResult, *Status) {
	got, st := schedule([]string{"uid-v"})
	if !st.IsSuccess() {
		return nil, &Status{Code: Unschedulable, Reasons: []string{"does not fit even so: " + st.Message()}}
	}
	out := &PodGroupPostFilterResult{Nominations: got.Proposed,
		Victims: []GroupVictim{{Pod: &pb.PodRef{Uid: "uid-v", Namespace: "ns", Name: "v"}, NodeName: "n1"}}}
	if e.stranger {
		out.Nominations = append(out.Nominations, ProposedAssignment{Pod: &pb.Pod{Metadata: &pb.ObjectMeta{Name: "x", Namespace: "ns", Uid: "uid-x"}}, NodeName: "n1"})
	}
	return out, &Status{Code: Success, Reasons: []string{"preempting 1 pod"}}
}

// fakeStream is the framework's side of one PodGroupPostFilter stream: its messages in order, and
// what the host sent.
type fakeStream struct {
	grpc.ServerStream
	in   []*pb.PodGroupPostFilterRequest
	sent []*pb.PodGroupPostFilterReply
}

func (f *fakeStream) Context() context.Context { return context.Background() }
func (f *fakeStream) Send(m *pb.PodGroupPostFilterReply) error {
	f.sent = append(f.sent, m)
	return nil
}
func (f *fakeStream) Recv() (*pb.PodGroupPostFilterRequest, error) {
	if len(f.in) == 0 {
		return nil, io.EOF
	}
	m := f.in[0]
	f.in = f.in[1:]
	return m, nil
}

func groupFilterHost(t *testing.T, plugin Plugin) *Host {
	t.Helper()
	h, err := NewHost([]Registration{{Name: "E",
		Factory: func(json.RawMessage, *Env) (Plugin, error) { return plugin, nil }}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Configure(context.Background(), &pb.ConfigureRequest{Plugin: "E", Profile: "p"}); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestPodGroupPostFilterAsksOverTheStreamAndAnswersNominationsAndVictims(t *testing.T) {
	if got, want := pointsOf(evictAll{}), []pb.ExtensionPoint{pb.ExtensionPoint_EXTENSION_POINT_POD_GROUP_POST_FILTER}; !reflect.DeepEqual(got, want) {
		t.Fatalf("points = %v, want %v", got, want)
	}
	pods := []*pb.Pod{{Metadata: &pb.ObjectMeta{Name: "p0", Namespace: "ns", Uid: "uid-p0"}},
		{Metadata: &pb.ObjectMeta{Name: "p1", Namespace: "ns", Uid: "uid-p1"}}}
	start := &pb.PodGroupPostFilterRequest{Msg: &pb.PodGroupPostFilterRequest_Start{Start: &pb.PodGroupPostFilterStart{
		Ctx:          &pb.PodGroupContext{GroupCycleId: "g1", Plugin: "E", Profile: "p", Namespace: "ns", Name: "g", Pods: pods},
		MaxSchedules: 16}}}
	scheduled := &pb.PodGroupPostFilterRequest{Msg: &pb.PodGroupPostFilterRequest_Scheduled{Scheduled: &pb.PodGroupScheduleResult{
		Assignments: []*pb.PlacementAssignment{{Pod: 0, NodeName: "n1"}, {Pod: 1, NodeName: "n2"}}}}}

	for _, tc := range []struct {
		name     string
		plugin   evictAll
		code     pb.Code
		reason   string
		nominate []*pb.PlacementAssignment
		victims  int
	}{
		{"answers", evictAll{}, pb.Code_CODE_SUCCESS, "preempting 1 pod",
			[]*pb.PlacementAssignment{{Pod: 0, NodeName: "n1"}, {Pod: 1, NodeName: "n2"}}, 1},
		{"stranger", evictAll{stranger: true}, pb.Code_CODE_ERROR,
			"nominated pod ns/x is not an unscheduled pod of pod group ns/g", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := &fakeStream{in: []*pb.PodGroupPostFilterRequest{start, scheduled}}
			if err := groupFilterHost(t, tc.plugin).PodGroupPostFilter(stream); err != nil {
				t.Fatal(err)
			}
			if len(stream.sent) != 2 {
				t.Fatalf("sent %d messages, want 2 (the ask, the result)", len(stream.sent))
			}
			ask := stream.sent[0].GetSchedule()
			if ask == nil || len(ask.GetRemovedPods()) != 1 || ask.GetRemovedPods()[0].GetUid() != "uid-v" {
				t.Errorf("ask = %v, want the group scheduled without uid-v", stream.sent[0])
			}
			res := stream.sent[1].GetResult()
			if res.GetStatus().GetCode() != tc.code || !strings.Contains(strings.Join(res.GetStatus().GetReasons(), ";"), tc.reason) {
				t.Errorf("status = %v, want %v with %q", res.GetStatus(), tc.code, tc.reason)
			}
			var nominated []string
			for _, a := range res.GetNominations() {
				nominated = append(nominated, pods[a.GetPod()].GetMetadata().GetName()+"="+a.GetNodeName())
			}
			var want []string
			for _, a := range tc.nominate {
				want = append(want, pods[a.GetPod()].GetMetadata().GetName()+"="+a.GetNodeName())
			}
			if !reflect.DeepEqual(nominated, want) || len(res.GetVictims()) != tc.victims {
				t.Errorf("nominated %v and %d victims, want %v and %d", nominated, len(res.GetVictims()), want, tc.victims)
			}
		})
	}
}

func TestPodGroupPostFilterRefusesAStreamWithoutStart(t *testing.T) {
	stream := &fakeStream{in: []*pb.PodGroupPostFilterRequest{{Msg: &pb.PodGroupPostFilterRequest_Scheduled{
		Scheduled: &pb.PodGroupScheduleResult{}}}}}
	err := groupFilterHost(t, evictAll{}).PodGroupPostFilter(stream)
	if err == nil || !strings.Contains(err.Error(), "a PodGroupPostFilter stream must start with PodGroupPostFilterStart") {
		t.Fatalf("err = %v, want the stream refused for not starting with its start", err)
	}
}
