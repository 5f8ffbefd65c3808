// Package outrigger is the Go SDK for Outrigger plugin hosts: it serves plugins written against its
// batch-shaped API (or kube-scheduler's own interfaces, through package kube) as the Plugin service of
// proto/outrigger/v1, follows the framework's snapshot mirror, bridges CycleState and joins the
// framework's traces.
//
// A plugin is a value with a Name and one method per extension point it implements (the interfaces in
// plugin.go); the host derives the plugin's manifest from the methods present. See docs/plugin-go.md.
package outrigger

import (
	"fmt"
	"strings"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// Code is a plugin's result code; the values are kube-scheduler's framework.Code, value for value.
type Code = pb.Code

// The result codes.
const (
	Success                      = pb.Code_CODE_SUCCESS
	Error                        = pb.Code_CODE_ERROR
	Unschedulable                = pb.Code_CODE_UNSCHEDULABLE
	UnschedulableAndUnresolvable = pb.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
	Wait                         = pb.Code_CODE_WAIT
	Skip                         = pb.Code_CODE_SKIP
	Pending                      = pb.Code_CODE_PENDING
)

// Status is a plugin's answer: a code and user-readable reasons. A nil *Status means Success.
type Status struct {
	Code    Code
	Reasons []string
}

// NewStatus is a status with the given code and reasons.
func NewStatus(code Code, reasons ...string) *Status { return &Status{Code: code, Reasons: reasons} }

// AsStatus is an Error status carrying err's message (nil for a nil error).
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{Code: Error, Reasons: []string{err.Error()}}
}

// IsSuccess reports whether s is nil or has code Success.
func (s *Status) IsSuccess() bool { return s == nil || s.Code == Success }

// Message is the reasons joined with ", ".
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.Reasons, ", ")
}

func (s *Status) String() string {
	if s == nil {
		return "Success"
	}
	return fmt.Sprintf("%s: %s", codeName(s.Code), s.Message())
}

func codeName(c Code) string {
	name := strings.TrimPrefix(c.String(), "CODE_")
	var b strings.Builder
	for _, word := range strings.Split(name, "_") {
		if word == "" {
			continue
		}
		b.WriteString(word[:1])
		b.WriteString(strings.ToLower(word[1:]))
	}
	return b.String()
}

// ToProto is s as an outrigger.v1.Status (nil: Success).
func (s *Status) ToProto() *pb.Status {
	if s == nil {
		return &pb.Status{}
	}
	return &pb.Status{Code: s.Code, Reasons: append([]string(nil), s.Reasons...)}
}

// StatusFromProto is the Status of an outrigger.v1.Status; an unknown code becomes an Error naming it.
func StatusFromProto(p *pb.Status) *Status {
	if p == nil {
		return nil
	}
	if _, known := pb.Code_name[int32(p.Code)]; !known {
		return &Status{Code: Error, Reasons: append(append([]string(nil), p.Reasons...), fmt.Sprintf("unknown status code %d", p.Code))}
	}
	return &Status{Code: p.Code, Reasons: append([]string(nil), p.Reasons...)}
}
