package kube

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
)

// DecodeArgs is a plugin's pluginConfig args as kube-scheduler hands them to its factory: for a
// plugin whose args type kube-scheduler knows (kind "<Name>Args" in kubescheduler.config.k8s.io/v1,
// e.g. NodeResourcesFitArgs) the v1 type decoded strictly, defaulted and converted to the internal
// type (empty args give the defaults, as kube-scheduler's defaulted configuration does); for any other
// plugin a runtime.Unknown holding the JSON, which out-of-tree plugins decode with
// frameworkruntime.DecodeInto.
func DecodeArgs(name string, raw []byte) (runtime.Object, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	obj, err := scheme.Scheme.New(configv1.SchemeGroupVersion.WithKind(name + "Args"))
	if err != nil {
		return &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return nil, fmt.Errorf("decoding %sArgs: %w", name, err)
	}
	scheme.Scheme.Default(obj)
	internal, err := scheme.Scheme.ConvertToVersion(obj, config.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("converting %sArgs: %w", name, err)
	}
	return internal, nil
}
