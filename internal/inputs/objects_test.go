package inputs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/inputs"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

var scheme = kube.NewScheme()

func newObjects(t *testing.T, objs ...client.Object) *inputs.Objects {
	t.Helper()
	r, err := inputs.NewObjects(scheme, objs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// template is an AWSMachineTemplate of apiVersion in openshift-cluster-api.
func template(apiVersion, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": "AWSMachineTemplate",
		"metadata": map[string]any{"name": name, "namespace": bootimage.ClusterAPINamespace},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"ami": map[string]any{"id": "ami-1"}}}},
	}}
	return u
}

func TestObjectsGet(t *testing.T) {
	ctx := context.Background()
	infra := fixtures.Infrastructure(configv1.AWSPlatformType)
	r := newObjects(t, infra, fixtures.MachineSet("a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))

	got := &configv1.Infrastructure{}
	if err := r.Get(ctx, client.ObjectKey{Name: "cluster"}, got); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got, infra) {
		t.Errorf("Get: got %+v, want %+v", got, infra)
	}
	got.Status.InfrastructureName = "changed"
	again := &configv1.Infrastructure{}
	if err := r.Get(ctx, client.ObjectKey{Name: "cluster"}, again); err != nil || again.Status.InfrastructureName != infra.Status.InfrastructureName {
		t.Errorf("a read is not a copy: %v, %q", err, again.Status.InfrastructureName)
	}

	for name, key := range map[string]client.ObjectKey{
		"another name":      {Name: "other"},
		"another namespace": {Namespace: "default", Name: "cluster"},
	} {
		if err := r.Get(ctx, key, &configv1.Infrastructure{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: want NotFound, got %v", name, err)
		}
	}
	if err := r.Get(ctx, client.ObjectKey{Name: "version"}, &configv1.ClusterVersion{}); !apierrors.IsNotFound(err) {
		t.Errorf("a kind not given: want NotFound, got %v", err)
	}

	// A typed object read as unstructured, as a client reads it.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(machinev1beta1.GroupVersion.WithKind("MachineSet"))
	if err := r.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "a"}, u); err != nil {
		t.Fatal(err)
	}
	if u.GetName() != "a" || u.GetKind() != "MachineSet" {
		t.Errorf("unstructured read: %v", u.Object)
	}
	if _, found, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec", "providerSpec", "value"); !found {
		t.Errorf("unstructured read lacks the providerSpec: %v", u.Object)
	}
}

func TestObjectsList(t *testing.T) {
	ctx := context.Background()
	b := fixtures.MachineSet("b", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
	a := fixtures.MachineSet("a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
	a.Labels = map[string]string{"pick": "me"}
	elsewhere := fixtures.MachineSet("c", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
	elsewhere.Namespace = "default"
	r := newObjects(t, b, a, elsewhere,
		node("worker", map[string]string{"node-role.kubernetes.io/worker": "", corev1.LabelArchStable: "amd64"}),
		node("master-0", map[string]string{"node-role.kubernetes.io/control-plane": "", corev1.LabelArchStable: "arm64"}))

	names := func(l *machinev1beta1.MachineSetList) []string {
		var out []string
		for _, ms := range l.Items {
			out = append(out, ms.Namespace+"/"+ms.Name)
		}
		return out
	}
	cases := []struct {
		name string
		opts []client.ListOption
		want []string
	}{
		{"all, by namespace then name", nil, []string{"default/c", "openshift-machine-api/a", "openshift-machine-api/b"}},
		{"in a namespace", []client.ListOption{client.InNamespace(fixtures.MachineAPINamespace)}, []string{"openshift-machine-api/a", "openshift-machine-api/b"}},
		{"by labels", []client.ListOption{client.MatchingLabels{"pick": "me"}}, []string{"openshift-machine-api/a"}},
		{"none", []client.ListOption{client.InNamespace("nowhere")}, nil},
	}
	for _, c := range cases {
		l := &machinev1beta1.MachineSetList{}
		if err := r.List(ctx, l, c.opts...); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := names(l); !apiequality.Semantic.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}

	if err := r.List(ctx, &machinev1beta1.MachineSetList{}, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.x", "y")}); err == nil {
		t.Error("a field selector: want an error")
	}

	// Metadata only, as kube.ControlPlaneArch lists Nodes.
	arch, err := inputs.ControlPlaneArch(ctx, r)
	if err != nil || arch != "arm64" {
		t.Errorf("ControlPlaneArch: %q, %v; want arm64", arch, err)
	}
	meta := &metav1.PartialObjectMetadataList{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.List(ctx, meta); err != nil || len(meta.Items) != 2 || meta.Items[0].Name != "master-0" || meta.Items[0].Labels[corev1.LabelArchStable] != "arm64" {
		t.Errorf("metadata list: %v, %+v", err, meta.Items)
	}
}

func TestObjectsUnstructured(t *testing.T) {
	ctx := context.Background()
	owner := fixtures.ClusterAPIOwner(bootimage.KindMachineSet, "capi", "t-1")
	r := newObjects(t, template("infrastructure.cluster.x-k8s.io/v1beta2", "t-1"), owner)

	// The kind of any version: the one it was given in.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: clusterapi.InfrastructureGroup, Version: "v1beta1", Kind: "AWSMachineTemplate"})
	if err := r.Get(ctx, client.ObjectKey{Namespace: bootimage.ClusterAPINamespace, Name: "t-1"}, u); err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "infrastructure.cluster.x-k8s.io/v1beta2" {
		t.Errorf("apiVersion %q", u.GetAPIVersion())
	}

	m, err := r.RESTMapper().RESTMapping(schema.GroupKind{Group: clusterapi.InfrastructureGroup, Kind: "AWSMachineTemplate"})
	if err != nil || m.GroupVersionKind.Version != "v1beta2" {
		t.Errorf("RESTMapping of a kind given: %v, %v", m, err)
	}
	if _, err := r.RESTMapper().RESTMapping(schema.GroupKind{Group: clusterapi.InfrastructureGroup, Kind: "GCPMachineTemplate"}); !apimeta.IsNoMatchError(err) {
		t.Errorf("RESTMapping of a kind not given: want NoMatch, got %v", err)
	}

	// The loader's Cluster API reads: template found through the mapper, no twin among the objects.
	capi := inputs.ClusterAPI{Reader: r, Mapper: r.RESTMapper(), MachineAPI: r}
	owners, err := capi.Owners(ctx, bootimage.KindMachineSet)
	if err != nil || len(owners) != 1 || owners[0].GetName() != "capi" {
		t.Fatalf("Owners: %v, %v", owners, err)
	}
	if none, err := capi.Owners(ctx, bootimage.KindMachineDeployment); err != nil || len(none) != 0 {
		t.Errorf("Owners of a kind not given: %v, %v", none, err)
	}
	read, err := capi.Read(ctx, owners[0])
	if err != nil {
		t.Fatal(err)
	}
	if read.Template == nil || read.Template.GetName() != "t-1" || read.Twin != nil || read.Cluster != nil {
		t.Errorf("Read: template %v, twin %v, cluster %v", read.Template, read.Twin, read.Cluster)
	}
}

// The loader reads the same inputs from Objects as from a client over the same objects.
func TestLoaderOnObjectsAsOnAClient(t *testing.T) {
	ctx := context.Background()
	objs := func() []client.Object {
		return []client.Object{
			fixtures.Infrastructure(configv1.AWSPlatformType),
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, nil),
			fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
			fixtures.MachineConfiguration(nil),
			fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
			node("master-0", map[string]string{"node-role.kubernetes.io/master": "", corev1.LabelArchStable: "arm64"}),
		}
	}
	load := func(r client.Reader, complete bool) inputs.Inputs {
		t.Helper()
		l := inputs.Loader{Reader: r, Gates: kube.GateSource{Reader: r}, Selection: inputs.SelectionSpec, Complete: complete}
		in, err := l.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	fromObjects := load(newObjects(t, objs()...), false)
	fromClient := load(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs()...).Build(), true)
	// The fake client gives its objects resource versions of its own.
	fromObjects.Objects.BootImages.ResourceVersion, fromClient.Objects.BootImages.ResourceVersion = "", ""
	fromObjects.Objects.Infrastructure.ResourceVersion, fromClient.Objects.Infrastructure.ResourceVersion = "", ""
	// The gates hold unexported fields: compared as they print.
	a, b := fromObjects.Cluster, fromClient.Cluster
	if a.Gates == nil || fmt.Sprint(a.Gates) != fmt.Sprint(b.Gates) {
		t.Errorf("gates from objects %v, from a client %v", a.Gates, b.Gates)
	}
	a.Gates, b.Gates = nil, nil
	if !apiequality.Semantic.DeepEqual(a, b) {
		t.Errorf("Cluster from objects %+v\nfrom a client %+v", a, b)
	}
	if a.ControlPlaneArch != "arm64" || a.Platform != configv1.AWSPlatformType || !a.Stable {
		t.Errorf("Cluster from objects: %+v", a)
	}
	if len(fromObjects.Objects.Effective.MachineManagers) == 0 {
		t.Error("the selection computed from spec is empty")
	}

	// Complete: a Secret missing from a cluster does not exist; from files it was not given.
	spec := []byte(`{"userDataSecret":{"name":"missing"}}`)
	for _, c := range []struct {
		complete bool
		want     *bootimage.UserData
	}{{true, &bootimage.UserData{SecretName: "missing"}}, {false, nil}} {
		got, err := inputs.Loader{Reader: newObjects(t, objs()...), Complete: c.complete}.UserData(ctx, spec)
		if err != nil || !apiequality.Semantic.DeepEqual(got, c.want) {
			t.Errorf("Complete %v: got %+v, %v; want %+v", c.complete, got, err, c.want)
		}
	}
	got, err := inputs.Loader{Reader: newObjects(t, objs()...)}.UserData(ctx, []byte(`{"userDataSecret":{"name":"worker-user-data"}}`))
	if err != nil || got == nil || !got.Found || len(got.Data) == 0 {
		t.Errorf("UserData of a Secret given: %+v, %v", got, err)
	}
}

// A template created with its owner may not be in the cache when the owner's event comes: the
// server says whether it is missing.
func TestClusterAPIReadAsksTheServerForATemplateTheCacheLacks(t *testing.T) {
	ctx := context.Background()
	owner := fixtures.ClusterAPIOwner(bootimage.KindMachineSet, "capi", "t-1")
	cache := newObjects(t, template("infrastructure.cluster.x-k8s.io/v1beta2", "t-0"), owner)
	server := newObjects(t, template("infrastructure.cluster.x-k8s.io/v1beta2", "t-1"), owner)

	read, err := inputs.ClusterAPI{Reader: cache, Mapper: server.RESTMapper(), Live: server}.Read(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if read.Template == nil || read.Template.GetName() != "t-1" || read.Object.Problem != "" {
		t.Fatalf("template %v, problem %q: want t-1 from the server", read.Template, read.Object.Problem)
	}

	missing := fixtures.ClusterAPIOwner(bootimage.KindMachineSet, "gone", "t-2")
	read, err = inputs.ClusterAPI{Reader: cache, Mapper: server.RESTMapper(), Live: server}.Read(ctx, missing)
	if err != nil || read.Template != nil || !strings.Contains(read.Object.Problem, "not found") {
		t.Fatalf("template %v, problem %q, err %v: want not found, as the server says", read.Template, read.Object.Problem, err)
	}
}
