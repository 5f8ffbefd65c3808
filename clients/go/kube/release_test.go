//go:build !k8s1.34

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"runtime/debug"
	"testing"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	kubeframework "k8s.io/kubernetes/pkg/scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/outrigger"
)

// What the adapter does with kube-scheduler 1.37's interfaces (the 1.34 build has none of them).

type filterOnly struct{}

func (filterOnly) Name() string { return "P" }
func (filterOnly) Filter(context.Context, framework.CycleState, *v1.Pod, framework.NodeInfo) *framework.Status {
	return nil
}

type signing struct{ filterOnly }

func (signing) SignPod(context.Context, *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	return nil, nil
}

type generating struct{ filterOnly }

func (generating) GeneratePlacements(context.Context, framework.PodGroupCycleState, framework.PodGroupInfo,
	*framework.Placement) (*framework.GeneratePlacementsResult, *framework.Status) {
	return nil, nil
}

type placementScoring struct{}

func (placementScoring) Name() string { return "P" }
func (placementScoring) ScorePlacement(context.Context, framework.PlacementCycleState, framework.PodGroupInfo,
	*framework.PodGroupAssignments) (int64, *framework.Status) {
	return 0, nil
}
func (placementScoring) PlacementScoreExtensions() framework.PlacementScoreExtensions { return nil }

type groupPostFiltering struct{ generating }

func (groupPostFiltering) PodGroupPostFilter(context.Context, framework.PodGroupCycleState, framework.PodGroupInfo,
	framework.PodGroupSchedulingFunc) (*framework.PodGroupPostFilterResult, *framework.Status) {
	return nil, nil
}

type sorting struct{ signing }

type signingAlone struct{}

func (signingAlone) Name() string { return "P" }
func (signingAlone) SignPod(context.Context, *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	return nil, nil
}

func (sorting) Less(framework.QueuedEntityInfo, framework.QueuedEntityInfo) bool { return false }

func register(p framework.Plugin) Option {
	return WithPlugin("P", func(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) { return p, nil })
}

// TestUnservedPointsAreDetectedAndTheOthersServed: a plugin's 1.37 points the adapter does not serve
// (Sign without a point it signs for) are named and left out of its manifest, whose points are the
// others (the pod group cycle's PlacementGenerate, PlacementScore and PodGroupPostFilter among them,
// Sign with Filter); a plugin with nothing else is refused, naming them.
func TestUnservedPointsAreDetectedAndTheOthersServed(t *testing.T) {
	filter := []pb.ExtensionPoint{pb.ExtensionPoint_EXTENSION_POINT_FILTER}
	generate := append(append([]pb.ExtensionPoint(nil), filter...), pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_GENERATE)
	groupPost := append(append([]pb.ExtensionPoint(nil), generate...), pb.ExtensionPoint_EXTENSION_POINT_POD_GROUP_POST_FILTER)
	sign := append(append([]pb.ExtensionPoint(nil), filter...), pb.ExtensionPoint_EXTENSION_POINT_SIGN)
	cases := []struct {
		name     string
		plugin   framework.Plugin
		unserved []string
		points   []pb.ExtensionPoint
		err      string
	}{
		{"filter only", filterOnly{}, nil, filter, ""},
		{"sign", signing{}, nil, sign, ""},
		{"placement generate", generating{}, nil, generate, ""},
		{"pod group post filter", groupPostFiltering{}, nil, groupPost, ""},
		{"queue sort", sorting{}, []string{"QueueSort"}, sign, ""},
		{"placement score alone", placementScoring{}, nil, []pb.ExtensionPoint{pb.ExtensionPoint_EXTENSION_POINT_PLACEMENT_SCORE}, ""},
		{"sign alone", signingAlone{}, []string{"Sign"}, nil,
			"plugin P implements no extension point Outrigger can call (it implements Sign, not served out of process: " +
				"QueueSort's Less cannot be answered a key at a time, Sign only with a point it signs for)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := (&Plugin{p: tc.plugin}).Unserved(); !reflect.DeepEqual(got, tc.unserved) {
				t.Fatalf("unserved %v, want %v", got, tc.unserved)
			}
			regs, err := Registrations(Config{}, register(tc.plugin))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(regs[0].Points, tc.points) {
				t.Fatalf("points %v, want %v", regs[0].Points, tc.points)
			}
		})
	}
}

// preflight answers PreBindPreFlight with a result and a status.
type preflight struct{ st *framework.Status }

func (preflight) Name() string { return "P" }
func (p preflight) PreBindPreFlight(context.Context, framework.CycleState, *v1.Pod, string) (*framework.PreBindPreFlightResult, *framework.Status) {
	return &framework.PreBindPreFlightResult{AllowParallel: true}, p.st
}
func (preflight) PreBind(context.Context, framework.CycleState, *v1.Pod, string) *framework.Status {
	return nil
}

// TestPreBindPreFlightAnswersItsStatus: 1.37's PreBindPreFlight also returns a result (AllowParallel),
// which the contract does not carry; the status is the answer.
func TestPreBindPreFlightAnswersItsStatus(t *testing.T) {
	cases := []struct {
		name string
		st   *framework.Status
		want *outrigger.Status
	}{
		{"success", nil, nil},
		{"skip", framework.NewStatus(framework.Skip), &outrigger.Status{Code: outrigger.Skip}},
		{"error", framework.NewStatus(framework.Error, "no volume"), &outrigger.Status{Code: outrigger.Error, Reasons: []string{"no volume"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			regs, err := Registrations(Config{}, register(preflight{tc.st}))
			if err != nil {
				t.Fatal(err)
			}
			inst, err := regs[0].Factory(json.RawMessage("{}"), &outrigger.Env{Framework: func() *outrigger.Framework { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			got := inst.(*Plugin).PreBindPreFlight(&outrigger.Call{Context: context.Background(), CycleID: "c"}, &pb.Pod{Metadata: &pb.ObjectMeta{Name: "p", Namespace: "default"}}, "n1")
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("status %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestCompositePodGroupsAreNotFound: the contract carries no composite pod groups, so 1.37's composite
// pod group listers find none and say why.
func TestCompositePodGroupsAreNotFound(t *testing.T) {
	l := &Lister{}
	_, e1 := l.CompositePodGroupStates().Get("ns", "c")
	_, e2 := l.CompositePodGroups().Get("ns", "c")
	const why = " not found: pod groups are not carried to plugins served out of process"
	for i, tc := range []struct {
		err  error
		want string
	}{
		{e1, "state of composite pod group ns/c" + why},
		{e2, "composite pod group ns/c" + why},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("lister %d: %v, want %q", i, tc.err, tc.want)
		}
	}
}

// antiAffinityOn places a pod with required anti-affinity over topologyKey on node id (named "n<id>").
func antiAffinityOn(id uint32, topologyKey string) *pb.PodPlacement {
	name := fmt.Sprintf("p%d", id)
	return &pb.PodPlacement{Ref: &pb.PodRef{Uid: name, Namespace: "default", Name: name}, NodeId: id,
		NodeName: fmt.Sprintf("n%d", id), Affinity: &pb.Affinity{PodAntiAffinity: &pb.PodAffinity{Required: []*pb.PodAffinityTerm{{
			TopologyKey: topologyKey, LabelSelector: &pb.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}}
}

// TestNonHostScopedAntiAffinityList: 1.37's list of nodes whose pods have required anti-affinity wider
// than their node holds those nodes when InterPodAffinityHostnameFastPath is on (kube-scheduler fills
// it only then), and is empty when it is off (the default).
func TestNonHostScopedAntiAffinityList(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("gate %v", on), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.InterPodAffinityHostnameFastPath, on)
			m := outrigger.NewMirror(0)
			delta := &pb.SnapshotDelta{Generation: 1, FullResync: true, PodsAdded: []*pb.PodPlacement{
				antiAffinityOn(1, "topology.kubernetes.io/zone"), antiAffinityOn(2, v1.LabelHostname)}}
			for id := uint32(1); id <= 3; id++ {
				delta.Nodes = append(delta.Nodes, &pb.NodeUpsert{Id: id, Node: &pb.Node{
					Metadata: &pb.ObjectMeta{Name: fmt.Sprintf("n%d", id)}}})
			}
			m.Apply(delta)
			l := &Lister{}
			l.Set(m.Latest())
			names := func(list []framework.NodeInfo, err error) []string {
				if err != nil {
					t.Fatal(err)
				}
				out := []string{}
				for _, ni := range list {
					out = append(out, ni.Node().Name)
				}
				return out
			}
			wide := []string{}
			if on {
				wide = []string{"n1"}
			}
			if got := names(l.NodeInfos().HavePodsWithRequiredNonHostScopedAntiAffinityList()); !reflect.DeepEqual(got, wide) {
				t.Errorf("non-host-scoped: %v, want %v", got, wide)
			}
			if got := names(l.NodeInfos().HavePodsWithRequiredAntiAffinityList()); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
				t.Errorf("required anti-affinity: %v, want [n1 n2]", got)
			}
		})
	}
}

// handleServer is the framework's Handle service as far as waiting pods go: "waiting" is waiting.
type handleServer struct {
	pb.UnimplementedHandleServer
	rejected []string
}

func (h *handleServer) RejectWaitingPod(_ context.Context, r *pb.RejectWaitingPodRequest) (*pb.RejectWaitingPodResponse, error) {
	h.rejected = append(h.rejected, r.GetUid()+"/"+r.GetPlugin()+"/"+r.GetMessage())
	return &pb.RejectWaitingPodResponse{Found: r.GetUid() == "waiting"}, nil
}

// TestWaitingPodRejectSaysWhetherItStoppedThePod: 1.37's Reject answers whether the pod was waiting
// (the framework's answer); Preempt is not available out of process: it sends nothing and answers false.
func TestWaitingPodRejectSaysWhetherItStoppedThePod(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := &handleServer{}
	pb.RegisterHandleServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	fw, err := outrigger.Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fw.Close() }()
	pod := func(uid string) *waitingPod {
		return &waitingPod{fw: fw, pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}}}
	}
	var wp framework.WaitingPod = pod("waiting")
	if !wp.Reject("Gang", "gone") {
		t.Error("Reject of a waiting pod answered false")
	}
	if pod("bound").Reject("Gang", "gone") {
		t.Error("Reject of a pod not waiting answered true")
	}
	if wp.Preempt("Gang", "preempted") {
		t.Error("Preempt answered true")
	}
	if want := []string{"waiting/Gang/gone", "bound/Gang/gone"}; !reflect.DeepEqual(hs.rejected, want) {
		t.Errorf("the framework was asked %v, want %v", hs.rejected, want)
	}
}

// TestTheHostNamesItsKubernetesRelease: the version a host built with this module sends in its
// Handshake names the k8s.io/kubernetes it links, after replace directives, or the framework release
// the adapter was compiled for when the binary carries no module information.
func TestTheHostNamesItsKubernetesRelease(t *testing.T) {
	dep := func(version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: KubernetesModule, Version: version, Replace: replace}
	}
	cases := []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"required", &debug.BuildInfo{Deps: []*debug.Module{{Path: "k8s.io/api", Version: "v0.37.2"}, dep("v1.37.2", nil)}}, true, "v1.37.2"},
		{"replaced", &debug.BuildInfo{Deps: []*debug.Module{dep("v1.37.2", &debug.Module{Path: KubernetesModule, Version: "v1.34.7"})}}, true, "v1.34.7"},
		{"not linked", &debug.BuildInfo{Deps: []*debug.Module{{Path: "k8s.io/api", Version: "v0.37.2"}}}, true, "1.37"},
		{"no build information", nil, false, "1.37"},
	}
	for _, tc := range cases {
		if got := releaseOf(tc.info, tc.ok); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if got, want := Version(), outrigger.HostVersion+" kubernetes/"+Release(); got != want {
		t.Errorf("Version() = %q, want %q", got, want)
	}
}

// TestNodeResourcesFitScoresExtendedResourcesWithoutDRAObjects: 1.37's NodeResourcesFit asks the
// Handle's SharedDRAManager whether a scored extended resource is backed by a DeviceClass
// (DRAExtendedResource, locked on); the adapter's sees no DRA objects, so the resource is scored
// from the node's allocatable, as kube-scheduler does on a cluster without DeviceClasses.
func TestNodeResourcesFitScoresExtendedResourcesWithoutDRAObjects(t *testing.T) {
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	regs, err := Registrations(Config{}, WithPlugin(noderesources.Name, frameworkruntime.FactoryAdapter(fts, noderesources.NewFit)))
	if err != nil {
		t.Fatal(err)
	}
	args := `{"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "example.com/gpu", "weight": 1}]}}`
	inst, err := regs[0].Factory(json.RawMessage(args), &outrigger.Env{Framework: func() *outrigger.Framework { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	fit := inst.(*Plugin).Upstream()
	gpu := v1.ResourceName("example.com/gpu")
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("1"), gpu: resource.MustParse("1")}}}}}}
	ni := kubeframework.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), gpu: resource.MustParse("4"),
		v1.ResourcePods: resource.MustParse("110")}}})
	state := kubeframework.NewCycleState()
	if st := fit.(framework.PreScorePlugin).PreScore(context.Background(), state, pod, []framework.NodeInfo{ni}); !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	// LeastAllocated: cpu (4-1)/4 = 75, gpu (4-1)/4 = 75.
	score, st := fit.(framework.ScorePlugin).Score(context.Background(), state, pod, ni)
	if !st.IsSuccess() || score != 75 {
		t.Fatalf("Score: %d %v, want 75", score, st)
	}
	dra := (&Handle{}).SharedDRAManager()
	if c := dra.DeviceClassResolver().GetDeviceClass(gpu); c != nil {
		t.Errorf("a DeviceClass for %s: %v", gpu, c)
	}
	if _, err := dra.ResourceClaims().Get("default", "claim"); !apierrors.IsNotFound(err) {
		t.Errorf("a claim's Get: %v, want NotFound", err)
	}
}
