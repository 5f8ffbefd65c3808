package fwk

import "k8s.io/kube-scheduler/framework"

// What k8s.io/kube-scheduler/framework holds in 1.34 and 1.35 alike.
type (
	CycleState           = framework.CycleState
	StateData            = framework.StateData
	StateKey             = framework.StateKey
	Status               = framework.Status
	Code                 = framework.Code
	NodeInfo             = framework.NodeInfo
	PodInfo              = framework.PodInfo
	ActionType           = framework.ActionType
	ClusterEventWithHint = framework.ClusterEventWithHint
	APIDispatcher        = framework.APIDispatcher
)

// The status codes, action and queueing hint the adapter names.
const (
	Error         = framework.Error
	Unschedulable = framework.Unschedulable
	Wait          = framework.Wait
	All           = framework.All
	Queue         = framework.Queue
)

// NewStatus is kube-scheduler's framework.NewStatus.
func NewStatus(code Code, reasons ...string) *Status { return framework.NewStatus(code, reasons...) }

// AsStatus is kube-scheduler's framework.AsStatus.
func AsStatus(err error) *Status { return framework.AsStatus(err) }

// implements says p implements the interface T.
func implements[T any](p Plugin) bool {
	_, ok := p.(T)
	return ok
}
