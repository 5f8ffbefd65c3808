package kube

import (
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// quantity is an amount in the contract's canonical units (cpu in millicores, the rest whole units)
// as a Kubernetes quantity.
func quantity(name string, v int64) resource.Quantity {
	switch {
	case name == string(v1.ResourceCPU):
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	case name == string(v1.ResourceMemory) || name == string(v1.ResourceEphemeralStorage) ||
		strings.HasPrefix(name, v1.ResourceHugePagesPrefix):
		return *resource.NewQuantity(v, resource.BinarySI)
	default:
		return *resource.NewQuantity(v, resource.DecimalSI)
	}
}

func resourceList(m map[string]int64) v1.ResourceList {
	if len(m) == 0 {
		return nil
	}
	out := make(v1.ResourceList, len(m))
	for k, v := range m {
		out[v1.ResourceName(k)] = quantity(k, v)
	}
	return out
}

func timeOf(seconds float64) metav1.Time {
	if seconds == 0 {
		return metav1.Time{}
	}
	sec, frac := math.Modf(seconds)
	return metav1.NewTime(metav1.Unix(int64(sec), int64(frac*1e9)).Time)
}

func objectMeta(m *pb.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: types.UID(m.GetUid()),
		Labels: m.GetLabels(), Annotations: m.GetAnnotations(), CreationTimestamp: timeOf(m.GetCreationTimestamp()),
	}
	if m != nil && m.DeletionTimestamp != nil {
		t := timeOf(m.GetDeletionTimestamp())
		out.DeletionTimestamp = &t
	}
	return out
}

func labelSelector(s *pb.LabelSelector) *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{MatchLabels: s.GetMatchLabels()}
	for _, r := range s.GetMatchExpressions() {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.GetKey(), Operator: metav1.LabelSelectorOperator(r.GetOperator()), Values: r.GetValues(),
		})
	}
	return out
}

func nodeSelectorRequirements(rs []*pb.NodeSelectorRequirement) []v1.NodeSelectorRequirement {
	var out []v1.NodeSelectorRequirement
	for _, r := range rs {
		out = append(out, v1.NodeSelectorRequirement{Key: r.GetKey(), Operator: v1.NodeSelectorOperator(r.GetOperator()), Values: r.GetValues()})
	}
	return out
}

func nodeSelectorTerm(t *pb.NodeSelectorTerm) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{
		MatchExpressions: nodeSelectorRequirements(t.GetMatchExpressions()),
		MatchFields:      nodeSelectorRequirements(t.GetMatchFields()),
	}
}

func podAffinityTerm(t *pb.PodAffinityTerm) v1.PodAffinityTerm {
	return v1.PodAffinityTerm{
		TopologyKey: t.GetTopologyKey(), LabelSelector: labelSelector(t.GetLabelSelector()), Namespaces: t.GetNamespaces(),
		NamespaceSelector: labelSelector(t.GetNamespaceSelector()), MatchLabelKeys: t.GetMatchLabelKeys(),
		MismatchLabelKeys: t.GetMismatchLabelKeys(),
	}
}

func podAffinityTerms(ts []*pb.PodAffinityTerm) []v1.PodAffinityTerm {
	var out []v1.PodAffinityTerm
	for _, t := range ts {
		out = append(out, podAffinityTerm(t))
	}
	return out
}

func weightedTerms(ts []*pb.WeightedPodAffinityTerm) []v1.WeightedPodAffinityTerm {
	var out []v1.WeightedPodAffinityTerm
	for _, t := range ts {
		out = append(out, v1.WeightedPodAffinityTerm{Weight: t.GetWeight(), PodAffinityTerm: podAffinityTerm(t.GetTerm())})
	}
	return out
}

// Affinity is a proto Affinity as a v1.Affinity (nil for nil); an unset required node selector stays
// nil, a set one without terms matches no node, as in Kubernetes.
func Affinity(a *pb.Affinity) *v1.Affinity {
	if a == nil {
		return nil
	}
	out := &v1.Affinity{}
	if na := a.GetNodeAffinity(); na != nil {
		out.NodeAffinity = &v1.NodeAffinity{}
		if req := na.GetRequired(); req != nil {
			sel := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{}}
			for _, t := range req.GetTerms() {
				sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, nodeSelectorTerm(t))
			}
			out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = sel
		}
		for _, p := range na.GetPreferred() {
			out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(
				out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
				v1.PreferredSchedulingTerm{Weight: p.GetWeight(), Preference: nodeSelectorTerm(p.GetPreference())})
		}
	}
	if pa := a.GetPodAffinity(); pa != nil {
		out.PodAffinity = &v1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution:  podAffinityTerms(pa.GetRequired()),
			PreferredDuringSchedulingIgnoredDuringExecution: weightedTerms(pa.GetPreferred()),
		}
	}
	if pa := a.GetPodAntiAffinity(); pa != nil {
		out.PodAntiAffinity = &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution:  podAffinityTerms(pa.GetRequired()),
			PreferredDuringSchedulingIgnoredDuringExecution: weightedTerms(pa.GetPreferred()),
		}
	}
	return out
}

func container(c *pb.Container) v1.Container {
	out := v1.Container{
		Name: c.GetName(), Image: c.GetImage(),
		Resources: v1.ResourceRequirements{Requests: resourceList(c.GetRequests()), Limits: resourceList(c.GetLimits())},
	}
	for _, p := range c.GetPorts() {
		out.Ports = append(out.Ports, v1.ContainerPort{
			ContainerPort: p.GetContainerPort(), HostPort: p.GetHostPort(), Protocol: v1.Protocol(p.GetProtocol()), HostIP: p.GetHostIp(),
		})
	}
	if rp := c.GetRestartPolicy(); rp != "" {
		policy := v1.ContainerRestartPolicy(rp)
		out.RestartPolicy = &policy
	}
	return out
}

// mergeLabelKeys adds to a term's label selector a requirement for each of its matchLabelKeys (In
// the pod's value) and mismatchLabelKeys (NotIn) that the pod has a label for: what kube-apiserver does
// when it admits a pod (MatchLabelKeysInPodAffinity, GA and locked on since 1.33; kube-scheduler
// relies on it). Pods here do not pass an apiserver, so the conversion does it.
func mergeLabelKeys(term *v1.PodAffinityTerm, labels map[string]string) {
	if term.LabelSelector == nil || len(term.MatchLabelKeys)+len(term.MismatchLabelKeys) == 0 {
		return // a nil selector matches nothing either way
	}
	sel := term.LabelSelector.DeepCopy()
	for _, keys := range []struct {
		keys []string
		op   metav1.LabelSelectorOperator
	}{{term.MatchLabelKeys, metav1.LabelSelectorOpIn}, {term.MismatchLabelKeys, metav1.LabelSelectorOpNotIn}} {
		for _, k := range keys.keys {
			if v, ok := labels[k]; ok {
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: keys.op, Values: []string{v}})
			}
		}
	}
	term.LabelSelector = sel
}

func mergePodAffinityLabelKeys(a *v1.Affinity, labels map[string]string) {
	if a == nil {
		return
	}
	for _, terms := range [][]v1.PodAffinityTerm{podAffinityRequired(a.PodAffinity), antiAffinityRequired(a.PodAntiAffinity)} {
		for i := range terms {
			mergeLabelKeys(&terms[i], labels)
		}
	}
	for _, terms := range [][]v1.WeightedPodAffinityTerm{podAffinityPreferred(a.PodAffinity), antiAffinityPreferred(a.PodAntiAffinity)} {
		for i := range terms {
			mergeLabelKeys(&terms[i].PodAffinityTerm, labels)
		}
	}
}

func podAffinityRequired(a *v1.PodAffinity) []v1.PodAffinityTerm {
	if a == nil {
		return nil
	}
	return a.RequiredDuringSchedulingIgnoredDuringExecution
}

func podAffinityPreferred(a *v1.PodAffinity) []v1.WeightedPodAffinityTerm {
	if a == nil {
		return nil
	}
	return a.PreferredDuringSchedulingIgnoredDuringExecution
}

func antiAffinityRequired(a *v1.PodAntiAffinity) []v1.PodAffinityTerm {
	if a == nil {
		return nil
	}
	return a.RequiredDuringSchedulingIgnoredDuringExecution
}

func antiAffinityPreferred(a *v1.PodAntiAffinity) []v1.WeightedPodAffinityTerm {
	if a == nil {
		return nil
	}
	return a.PreferredDuringSchedulingIgnoredDuringExecution
}

// Pod is a proto Pod as a v1.Pod, as kube-apiserver would have admitted it (pod affinity terms with
// their matchLabelKeys/mismatchLabelKeys merged into the label selector).
func Pod(p *pb.Pod) *v1.Pod {
	spec := p.GetSpec()
	out := &v1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: objectMeta(p.GetMetadata()),
		Spec: v1.PodSpec{
			SchedulerName: spec.GetSchedulerName(), NodeName: spec.GetNodeName(), PriorityClassName: spec.GetPriorityClassName(),
			NodeSelector: spec.GetNodeSelector(), Affinity: Affinity(spec.GetAffinity()), Overhead: resourceList(spec.GetOverhead()),
		},
		Status: v1.PodStatus{NominatedNodeName: p.GetStatus().GetNominatedNodeName()},
	}
	mergePodAffinityLabelKeys(out.Spec.Affinity, out.Labels)
	setSchedulingGroup(out, spec)
	seeNamespace(out.Namespace)
	priority := int32(spec.GetPriority())
	out.Spec.Priority = &priority
	if pp := spec.GetPreemptionPolicy(); pp != "" {
		policy := v1.PreemptionPolicy(pp)
		out.Spec.PreemptionPolicy = &policy
	}
	for _, t := range spec.GetTolerations() {
		out.Spec.Tolerations = append(out.Spec.Tolerations, v1.Toleration{
			Key: t.GetKey(), Operator: v1.TolerationOperator(t.GetOperator()), Value: t.GetValue(),
			Effect: v1.TaintEffect(t.GetEffect()), TolerationSeconds: t.TolerationSeconds,
		})
	}
	for _, c := range spec.GetTopologySpreadConstraints() {
		tsc := v1.TopologySpreadConstraint{
			MaxSkew: c.GetMaxSkew(), TopologyKey: c.GetTopologyKey(),
			WhenUnsatisfiable: v1.UnsatisfiableConstraintAction(c.GetWhenUnsatisfiable()),
			LabelSelector:     labelSelector(c.GetLabelSelector()), MinDomains: c.MinDomains, MatchLabelKeys: c.GetMatchLabelKeys(),
		}
		if p := c.GetNodeAffinityPolicy(); p != "" {
			policy := v1.NodeInclusionPolicy(p)
			tsc.NodeAffinityPolicy = &policy
		}
		if p := c.GetNodeTaintsPolicy(); p != "" {
			policy := v1.NodeInclusionPolicy(p)
			tsc.NodeTaintsPolicy = &policy
		}
		out.Spec.TopologySpreadConstraints = append(out.Spec.TopologySpreadConstraints, tsc)
	}
	for _, g := range spec.GetSchedulingGates() {
		out.Spec.SchedulingGates = append(out.Spec.SchedulingGates, v1.PodSchedulingGate{Name: g})
	}
	for _, c := range spec.GetContainers() {
		out.Spec.Containers = append(out.Spec.Containers, container(c))
	}
	for _, c := range spec.GetInitContainers() {
		out.Spec.InitContainers = append(out.Spec.InitContainers, container(c))
	}
	for _, v := range spec.GetVolumes() {
		out.Spec.Volumes = append(out.Spec.Volumes, Volume(v))
	}
	return out
}

// PodOfPlacement is the pod a snapshot placement holds: the whole pod when the framework sent it, else
// the compact form (labels, requests as one container, host ports, inter-pod affinity).
func PodOfPlacement(p *pb.PodPlacement) *v1.Pod {
	if p.GetPod() != nil {
		pod := Pod(p.GetPod())
		if pod.Spec.NodeName == "" {
			pod.Spec.NodeName = p.GetNodeName()
		}
		return pod
	}
	c := &pb.Container{Name: "placement", Requests: p.GetRequests(), Ports: p.GetHostPorts()}
	priority := int32(p.GetPriority())
	seeNamespace(p.GetRef().GetNamespace())
	affinity := Affinity(p.GetAffinity())
	mergePodAffinityLabelKeys(affinity, p.GetLabels())
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.GetRef().GetName(), Namespace: p.GetRef().GetNamespace(),
			UID: types.UID(p.GetRef().GetUid()), Labels: p.GetLabels()},
		Spec: v1.PodSpec{NodeName: p.GetNodeName(), Priority: &priority, Affinity: affinity,
			Containers: []v1.Container{container(c)}},
	}
}

// Node is a proto Node as a v1.Node.
func Node(n *pb.Node) *v1.Node {
	out := &v1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: objectMeta(n.GetMetadata()),
		Spec:       v1.NodeSpec{Unschedulable: n.GetSpec().GetUnschedulable()},
		Status: v1.NodeStatus{
			Capacity: resourceList(n.GetStatus().GetCapacity()), Allocatable: resourceList(n.GetStatus().GetAllocatable()),
		},
	}
	for _, t := range n.GetSpec().GetTaints() {
		out.Spec.Taints = append(out.Spec.Taints, v1.Taint{Key: t.GetKey(), Value: t.GetValue(), Effect: v1.TaintEffect(t.GetEffect())})
	}
	for _, img := range n.GetStatus().GetImages() {
		out.Status.Images = append(out.Status.Images, v1.ContainerImage{Names: img.GetNames(), SizeBytes: img.GetSizeBytes()})
	}
	return out
}
