package manifests_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// shippedObjects decodes every shipped manifest strictly: a typo or unknown field fails.
func shippedObjects(t *testing.T) []runtime.Object {
	t.Helper()
	decoder := serializer.NewCodecFactory(clientgoscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	files, _ := filepath.Glob("*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests found")
	}
	var objects []runtime.Object
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
			objects = append(objects, obj)
		}
	}
	return objects
}

func shippedDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	for _, obj := range shippedObjects(t) {
		if d, ok := obj.(*appsv1.Deployment); ok {
			return d
		}
	}
	t.Fatal("no Deployment shipped")
	return nil
}

// TestManifestsDecodeStrictly fails on a typo or unknown field in the shipped manifests.
func TestManifestsDecodeStrictly(t *testing.T) {
	deployment := shippedDeployment(t)
	c := deployment.Spec.Template.Spec.Containers[0]
	if len(c.Resources.Limits) != 0 || len(c.Resources.Requests) == 0 {
		t.Errorf("container must have requests and no limits, has %+v", c.Resources)
	}
	if deployment.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q", deployment.Spec.Template.Spec.PriorityClassName)
	}
}

// TestDeploymentGivesCloudCallsWhatTheyNeed checks what the cloud calls need on a read-only root:
// the projected token that STS web identity reads, the cluster's proxy and trusted CA bundle, and
// nothing writable.
func TestDeploymentGivesCloudCallsWhatTheyNeed(t *testing.T) {
	deployment := shippedDeployment(t)
	pod := deployment.Spec.Template.Spec
	c := pod.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("container %s: readOnlyRootFilesystem must be true", c.Name)
	}
	if got := deployment.Annotations["config.openshift.io/inject-proxy"]; got != c.Name {
		t.Errorf("annotation config.openshift.io/inject-proxy = %q, want the container %q so that Proxy/cluster reaches it", got, c.Name)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		if v.EmptyDir != nil || v.HostPath != nil {
			t.Errorf("volume %s is writable: nothing needs to write", v.Name)
		}
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
		if !m.ReadOnly {
			t.Errorf("volume mount %s must be read-only", m.MountPath)
		}
	}

	// The cloud credential operator's web_identity_token_file on STS clusters.
	token := mounts["/var/run/secrets/openshift/serviceaccount"]
	var source *corev1.ServiceAccountTokenProjection
	if v := volumes[token.Name]; v.Projected != nil && len(v.Projected.Sources) == 1 {
		source = v.Projected.Sources[0].ServiceAccountToken
	}
	if source == nil || source.Audience != "openshift" || source.Path != "token" {
		t.Errorf("/var/run/secrets/openshift/serviceaccount/token must be a projected service account token with audience openshift, is %+v", volumes[token.Name])
	}

	// The trusted CA bundle, where Go reads the system trust on RHEL.
	ca := volumes[mounts["/etc/pki/ca-trust/extracted/pem"].Name].ConfigMap
	if ca == nil || len(ca.Items) != 1 || ca.Items[0].Key != "ca-bundle.crt" || ca.Items[0].Path != "tls-ca-bundle.pem" {
		t.Fatalf("/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem must be the ca-bundle.crt of a ConfigMap, is %+v", ca)
	}
	for _, obj := range shippedObjects(t) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == ca.Name && cm.Namespace == deployment.Namespace {
			if cm.Labels["config.openshift.io/inject-trusted-cabundle"] != "true" {
				t.Errorf("ConfigMap %s must be labelled config.openshift.io/inject-trusted-cabundle=true", cm.Name)
			}
			return
		}
	}
	t.Errorf("ConfigMap %s/%s is not shipped", deployment.Namespace, ca.Name)
}
