package manifests_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// TestManifestsDecodeStrictly fails on a typo or unknown field in the shipped manifests.
func TestManifestsDecodeStrictly(t *testing.T) {
	decoder := serializer.NewCodecFactory(clientgoscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	files, _ := filepath.Glob("*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests found")
	}
	var deployment *appsv1.Deployment
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := reader.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			obj, _, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if d, ok := obj.(*appsv1.Deployment); ok {
				deployment = d
			}
		}
	}
	if deployment == nil {
		t.Fatal("no Deployment shipped")
	}
	c := deployment.Spec.Template.Spec.Containers[0]
	if len(c.Resources.Limits) != 0 || len(c.Resources.Requests) == 0 {
		t.Errorf("container must have requests and no limits, has %+v", c.Resources)
	}
	if deployment.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q", deployment.Spec.Template.Spec.PriorityClassName)
	}
}
