// y2j: the kubelet's YAML-to-JSON step (sigs.k8s.io/yaml YAMLToJSON) for the differential test.
//
// Reads a JSON array of base64 documents on stdin and writes a JSON array of results:
// {"ok": bool, "json": "<YAMLToJSON output>", "error": "...", "strict_ok": bool, "strict_error": "..."}.
// Built offline against Debian's golang-k8s-sigs-yaml-dev (GO111MODULE=off GOPATH=/usr/share/gocode).
package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"os"

	"sigs.k8s.io/yaml"
)

type result struct {
	OK          bool   `json:"ok"`
	JSON        string `json:"json"`
	Error       string `json:"error,omitempty"`
	StrictOK    bool   `json:"strict_ok"`
	StrictError string `json:"strict_error,omitempty"`
}

func convert(data []byte) (r result) {
	defer func() {
		if p := recover(); p != nil {
			r = result{Error: "panic"}
		}
	}()
	j, err := yaml.YAMLToJSON(data)
	r.OK = err == nil
	r.JSON = string(j)
	if err != nil {
		r.Error = err.Error()
	}
	_, serr := yaml.YAMLToJSONStrict(data)
	r.StrictOK = serr == nil
	if serr != nil {
		r.StrictError = serr.Error()
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
