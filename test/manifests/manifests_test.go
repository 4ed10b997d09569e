// Package manifests_test checks the shipped manifests with the types of the projects that read them
// (Kubernetes, the Prometheus operator, Prometheus's rule parser). It is a module of its own so
// that the operator's module, which the MCO imports, does not require Prometheus.
package manifests_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// shippedObjects decodes every shipped manifest strictly: a typo or unknown field fails.
func shippedObjects(t *testing.T) []runtime.Object {
	t.Helper()
	decoder := serializer.NewCodecFactory(clientgoscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	files, _ := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
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

func init() {
	// The shipped ServiceMonitor and PrometheusRule decode strictly too, with the Prometheus
	// operator's own types.
	utilruntime.Must(monitoringv1.AddToScheme(clientgoscheme.Scheme))
}

// TestMetricsWiring checks what a test cluster cannot show: that Prometheus finds the Service in
// front of the Deployment's metrics port and verifies the certificate the Deployment serves.
func TestMetricsWiring(t *testing.T) {
	var (
		svc        *corev1.Service
		monitor    *monitoringv1.ServiceMonitor
		deployment *appsv1.Deployment
	)
	for _, obj := range append(objectsIn(t, manifests.MetricsFile), objectsIn(t, manifests.DeploymentFile)...) {
		switch o := obj.(type) {
		case *corev1.Service:
			svc = o
		case *monitoringv1.ServiceMonitor:
			monitor = o
		case *appsv1.Deployment:
			deployment = o
		}
	}
	if svc == nil || monitor == nil || deployment == nil {
		t.Fatalf("want a Service, a ServiceMonitor and a Deployment, have %v, %v, %v", svc != nil, monitor != nil, deployment != nil)
	}
	pod := deployment.Spec.Template
	c := pod.Spec.Containers[0]
	args := map[string]string{}
	for _, a := range c.Args {
		if name, value, ok := strings.Cut(a, "="); ok {
			args[name] = value
		}
	}

	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) || svc.Namespace != deployment.Namespace {
		t.Errorf("Service %s selects %v, not the Deployment's pods %v", svc.Name, svc.Spec.Selector, pod.Labels)
	}
	port := svc.Spec.Ports[0]
	var containerPort int32
	for _, p := range c.Ports {
		if p.Name == port.TargetPort.String() {
			containerPort = p.ContainerPort
		}
	}
	if want := fmt.Sprintf(":%d", containerPort); args["--metrics-bind-address"] != want {
		t.Errorf("--metrics-bind-address=%s, but Service port %s targets container port %q = %d", args["--metrics-bind-address"], port.Name, port.TargetPort.String(), containerPort)
	}

	secretName := svc.Annotations["service.beta.openshift.io/serving-cert-secret-name"]
	var certVolume string
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secretName {
			certVolume = v.Name
		}
	}
	var mountPath string
	for _, m := range c.VolumeMounts {
		if m.Name == certVolume {
			mountPath = m.MountPath
		}
	}
	if secretName == "" || mountPath == "" || args["--metrics-cert-dir"] != mountPath {
		t.Errorf("serving certificate Secret %q is mounted at %q, --metrics-cert-dir=%q", secretName, mountPath, args["--metrics-cert-dir"])
	}

	selector, err := metav1.LabelSelectorAsSelector(&monitor.Spec.Selector)
	if err != nil || !selector.Matches(labels.Set(svc.Labels)) || !slices.Contains(monitor.Spec.NamespaceSelector.MatchNames, svc.Namespace) {
		t.Errorf("ServiceMonitor selects %v in %v, not Service %s/%s %v", monitor.Spec.Selector, monitor.Spec.NamespaceSelector.MatchNames, svc.Namespace, svc.Name, svc.Labels)
	}
	ep := monitor.Spec.Endpoints[0]
	//lint:ignore SA1019 the shipped ServiceMonitor scrapes with the service account's token file
	tokenFile := ep.BearerTokenFile
	if ep.Port != port.Name || ep.Scheme == nil || *ep.Scheme != "https" || tokenFile == "" {
		t.Errorf("ServiceMonitor endpoint must scrape port %s over https with a bearer token, has port %s, scheme %v, bearerTokenFile %q", port.Name, ep.Port, ep.Scheme, tokenFile)
	}
	if want := svc.Name + "." + svc.Namespace + ".svc"; ep.TLSConfig == nil || ep.TLSConfig.ServerName == nil || *ep.TLSConfig.ServerName != want {
		t.Errorf("ServiceMonitor must verify the serving certificate for %s", want)
	}
}

// objectsIn decodes every object of the shipped manifest file name.
func objectsIn(t *testing.T, name string) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(manifestsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(clientgoscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var objs []runtime.Object
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		objs = append(objs, obj)
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
		// The one thing written is the vSphere OVA cache, bounded by the emptyDir's size limit.
		if (v.EmptyDir != nil && (v.Name != "ova-cache" || v.EmptyDir.SizeLimit == nil)) || v.HostPath != nil {
			t.Errorf("volume %s is writable: only the size-limited ova-cache may be", v.Name)
		}
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
		if !m.ReadOnly && m.Name != "ova-cache" {
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

// TestAlertsHaveRunbooks checks that every shipped alert links a runbook that exists in docs/runbooks.
func TestAlertsHaveRunbooks(t *testing.T) {
	const base = "https://github.com/bootimage-operator/bootimage-operator/blob/main/docs/runbooks/"
	var alerts int
	for _, obj := range objectsIn(t, manifests.MetricsFile) {
		rule, ok := obj.(*monitoringv1.PrometheusRule)
		if !ok {
			continue
		}
		for _, g := range rule.Spec.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				alerts++
				url := r.Annotations["runbook_url"]
				if url != base+r.Alert+".md" {
					t.Errorf("alert %s: runbook_url is %q, want %s%s.md", r.Alert, url, base, r.Alert)
					continue
				}
				if _, err := os.Stat(filepath.Join(manifestsDir, "..", "docs", "runbooks", r.Alert+".md")); err != nil {
					t.Errorf("alert %s: runbook missing: %v", r.Alert, err)
				}
			}
		}
	}
	if alerts == 0 {
		t.Fatal("no alerts shipped")
	}
}

// payloadAnnotations are what the CVO needs to apply an object of the MCO's install/: the
// cluster profiles that include it (the MCO's own), and the capability without which it is left
// out (no Machine API, no boot images to manage).
var payloadAnnotations = map[string]string{
	"include.release.openshift.io/self-managed-high-availability": "true",
	"include.release.openshift.io/single-node-developer":          "true",
	"capability.openshift.io/name":                                "MachineAPI",
}

// capiNamespace exists only where Cluster API does: cluster-capi-operator ships it with gate
// ClusterAPIMachineManagement and capability ClusterAPI. What the operator ships there needs both,
// and its own gate, or the CVO would fail to apply it on clusters without the namespace.
const capiNamespace = "openshift-cluster-api"

var capiPayloadAnnotations = map[string]string{
	"include.release.openshift.io/self-managed-high-availability": "true",
	"include.release.openshift.io/single-node-developer":          "true",
	"capability.openshift.io/name":                                "MachineAPI+ClusterAPI",
	"release.openshift.io/feature-gate":                           "ClusterAPIMachineManagement,ManagedBootImagesAWSCAPI",
}

// dashboardNamespace is where the console reads dashboards. A dashboard is of no use without the
// console, so it also needs capability Console, as the dashboards other operators ship do.
const dashboardNamespace = "openshift-config-managed"

var dashboardPayloadAnnotations = map[string]string{
	"include.release.openshift.io/self-managed-high-availability": "true",
	"include.release.openshift.io/single-node-developer":          "true",
	"capability.openshift.io/name":                                "MachineAPI+Console",
}

// TestPayloadFileNames checks the run-level names the CVO orders the payload's manifests by.
func TestPayloadFileNames(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	var files []string
	for _, p := range paths {
		files = append(files, filepath.Base(p))
	}
	name := regexp.MustCompile(`^0000_(80|90)_machine-config_[0-9]{2}_bootimage-operator_[a-z-]+\.yaml$`)
	for _, f := range files {
		if !name.MatchString(f) {
			t.Errorf("%s: not a run-level name 0000_80_machine-config_NN_bootimage-operator_<what>.yaml", f)
		}
	}
	for _, f := range []string{manifests.RBACFile, manifests.CredentialsFile, manifests.DeploymentFile, manifests.AdmissionFile, manifests.MetricsFile, manifests.DashboardFile} {
		if !slices.Contains(files, f) {
			t.Errorf("%s is not shipped", f)
		}
	}
	if !(manifests.RBACFile < manifests.DeploymentFile) {
		t.Errorf("the RBAC (%s) must sort before the Deployment (%s)", manifests.RBACFile, manifests.DeploymentFile)
	}
}

// TestPayloadAnnotations checks that every shipped object carries the profile and capability
// annotations.
func TestPayloadAnnotations(t *testing.T) {
	for _, obj := range shippedObjects(t) {
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		want := payloadAnnotations
		switch m.GetNamespace() {
		case capiNamespace:
			want = capiPayloadAnnotations
		case dashboardNamespace:
			want = dashboardPayloadAnnotations
		}
		for k, v := range want {
			if got := m.GetAnnotations()[k]; got != v {
				t.Errorf("%T %s: annotation %s = %q, want %q", obj, m.GetName(), k, got, v)
			}
		}
	}
}

// TestImageReferences checks that every image is the release placeholder of an image-references tag.
func TestImageReferences(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(manifestsDir, "image-references"))
	if err != nil {
		t.Fatal(err)
	}
	var refs struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Tags []struct {
				Name string `json:"name"`
				From struct {
					Kind string `json:"kind"`
					Name string `json:"name"`
				} `json:"from"`
			} `json:"tags"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &refs); err != nil {
		t.Fatal(err)
	}
	if refs.Kind != "ImageStream" {
		t.Fatalf("image-references: kind %q, want ImageStream", refs.Kind)
	}
	placeholders := map[string]bool{}
	for _, tag := range refs.Spec.Tags {
		if want := placeholderPrefix + tag.Name; tag.From.Kind != "DockerImage" || tag.From.Name != want {
			t.Errorf("image-references tag %s: from %s %s, want DockerImage %s", tag.Name, tag.From.Kind, tag.From.Name, want)
		}
		placeholders[tag.From.Name] = true
	}
	pod := shippedDeployment(t).Spec.Template.Spec
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		if !placeholders[c.Image] {
			t.Errorf("container %s: image %s is not a placeholder listed in image-references", c.Name, c.Image)
		}
	}
	if !placeholders[placeholderPrefix+"machine-config-operator"] {
		t.Error("the operator must run from the machine-config-operator image, which carries its binary")
	}
}

// placeholderPrefix is the image the release tooling replaces, as in the MCO's install/.
const placeholderPrefix = "placeholder.url.oc.will.replace.this.org/placeholdernamespace:"

// TestControlPlaneScheduling checks that the pod runs on control-plane nodes, whichever taint
// they carry.
func TestControlPlaneScheduling(t *testing.T) {
	pod := shippedDeployment(t).Spec.Template.Spec
	for _, key := range []string{"node-role.kubernetes.io/master", "node-role.kubernetes.io/control-plane"} {
		if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
			return tol.Key == key && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoSchedule
		}) {
			t.Errorf("no NoSchedule toleration of %s", key)
		}
	}
}
