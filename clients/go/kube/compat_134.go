//go:build k8s1.34

package kube

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/kube/internal/fwk"
)

// The 1.34 build's side of compat.go: 1.34's WaitingPod.Reject answers nothing, and its NodeInfo and
// SharedLister have no non-host-scoped anti-affinity list nor pod groups.

// Reject rejects the waiting pod with plugin's message.
func (w *waitingPod) Reject(plugin, msg string) { w.reject(plugin, msg) }

func nonHostScoped(*framework.NodeInfo) bool { return false }

// SharedDRAManager is nil: no DRA objects reach plugins served out of process, and 1.34's in-tree
// plugins ask for it only with DRA's alpha extended resources on.
func (h *Handle) SharedDRAManager() fwk.SharedDRAManager { return nil }

// setSchedulingGroup does nothing: 1.34's Pod has no spec.schedulingGroup.
func setSchedulingGroup(*v1.Pod, *pb.PodSpec) {}

// placementPoints are none: 1.34 has no pod group cycle.
func placementPoints(fwk.Plugin) []pb.ExtensionPoint { return nil }

// signPoints are none: 1.34 has no SignPlugin.
func signPoints(fwk.Plugin) []pb.ExtensionPoint { return nil }

// watchPodGroups does nothing: 1.34 has no pod groups.
func (s *shared) watchPodGroups(fwk.Plugin) {}
