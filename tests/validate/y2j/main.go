// y2j: the kubelet's decode step for the differential test (tests/validate/test_differential_go.py).
//
// Built once per supported kubelet version against the very modules that version pins (the test
// writes go.mod from k8s.io/kubernetes' own go.mod: k8s.io/apimachinery and k8s.io/api at v0.x.y,
// sigs.k8s.io/yaml and go.yaml.in/yaml/v2 at its versions). For each input it runs what
// pkg/kubelet/config/common.go tryDecodeSinglePod runs: apimachinery util/yaml.ToJSON (a file whose
// first non-space byte is '{' is passed on as is; anything else goes through sigs.k8s.io/yaml
// YAMLToJSON), then the JSON serializer's Decode into a core/v1 Pod. A stand-in for the kubelet
// only in that it uses a scheme with core/v1 alone instead of legacyscheme (the decode errors
// come from the same serializer).
//
// Reads a JSON array of base64 documents on stdin; writes a JSON array of results:
//
//	{"json_prefix": bool,          // util/yaml.IsJSONBuffer: strict JSON path
//	 "ok": bool, "error": "...",   // ToJSON, and for the JSON path json.Unmarshal (syntax)
//	 "json": "...",                // the document re-encoded (numbers kept as written)
//	 "strict_ok": bool,            // YAMLToJSONStrict (duplicate keys refused) on the YAML path
//	 "pod_ok": bool, "pod_error": "..."} // runtime.Decode into a v1 Pod
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

type result struct {
	JSONPrefix bool   `json:"json_prefix"`
	OK         bool   `json:"ok"`
	JSON       string `json:"json"`
	Error      string `json:"error,omitempty"`
	StrictOK   bool   `json:"strict_ok"`
	PodOK      bool   `json:"pod_ok"`
	PodError   string `json:"pod_error,omitempty"`
}

var codecs serializer.CodecFactory

func init() {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	codecs = serializer.NewCodecFactory(scheme)
}

func convert(data []byte) (r result) {
	defer func() {
		if p := recover(); p != nil {
			r = result{Error: fmt.Sprintf("panic: %v", p)}
		}
	}()
	r.JSONPrefix = utilyaml.IsJSONBuffer(data)
	j, err := utilyaml.ToJSON(data)
	if err != nil {
		r.Error = err.Error()
	} else {
		// The kubelet's JSON serializer checks the syntax of the whole input (Interpret's
		// json.Unmarshal); numbers are only converted where a typed field takes them, so the
		// document is re-encoded with json.Number (kept as written).
		var syntax json.RawMessage // checks the syntax only (checkValid), as Interpret's first step
		var v interface{}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.UseNumber()
		if err := json.Unmarshal(j, &syntax); err != nil {
			r.Error = err.Error()
		} else if err := dec.Decode(&v); err != nil {
			r.Error = err.Error()
		} else if out, err := json.Marshal(v); err != nil {
			r.Error = err.Error()
		} else {
			r.OK = true
			r.JSON = string(out)
		}
	}
	if r.JSONPrefix {
		r.StrictOK = r.OK
	} else {
		_, serr := yaml.YAMLToJSONStrict(data)
		r.StrictOK = serr == nil
	}
	if err == nil {
		obj, _, derr := codecs.UniversalDeserializer().Decode(j, nil, nil)
		if derr == nil {
			if _, ok := obj.(*corev1.Pod); !ok {
				derr = fmt.Errorf("decoded a %T, not a Pod", obj)
			}
		}
		r.PodOK = derr == nil
		if derr != nil {
			r.PodError = derr.Error()
		}
	} else {
		r.PodError = err.Error()
	}
	return r
}

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		panic(err)
	}
	var docs []string
	if err := json.Unmarshal(raw, &docs); err != nil {
		panic(err)
	}
	out := make([]result, 0, len(docs))
	for _, d := range docs {
		data, err := base64.StdEncoding.DecodeString(d)
		if err != nil {
			panic(err)
		}
		out = append(out, convert(data))
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
