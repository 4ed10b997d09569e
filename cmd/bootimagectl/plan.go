package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/vspherecloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/cpms"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/capi"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// planInputs are the objects a plan reads, from files or from a cluster.
type planInputs struct {
	infra       *configv1.Infrastructure
	featureGate *configv1.FeatureGate
	version     *configv1.ClusterVersion
	mc          *operatorv1.MachineConfiguration
	bootImages  *corev1.ConfigMap
	machineSets []*machinev1beta1.MachineSet
	cpms        []*machinev1.ControlPlaneMachineSet
	secrets     map[string]*corev1.Secret
	// pools and osImageStream choose the OS stream of unlabelled objects.
	pools         []mcfgv1.MachineConfigPool
	osImageStream *mcfgv1.OSImageStream
	// clusterAPI are the Cluster API MachineSets and MachineDeployments of openshift-cluster-api,
	// and templates the infrastructure machine templates they name, by templateKey.
	clusterAPI []*unstructured.Unstructured
	templates  map[templateKey]*unstructured.Unstructured
	// controlPlaneArch is the control plane's architecture (bootimage.ControlPlaneArch).
	controlPlaneArch string
	// live says the inputs are a cluster's, read whole: a Secret missing from secrets does not
	// exist (rather than was not given), and the selection in force is MachineConfiguration's
	// status, as the operator reads it (rather than computed from spec).
	live bool
	// vcenters reads vSphere templates on a live cluster; nil offline.
	vcenters *vspherecloud.VCenters
}

// templateKey names an infrastructure machine template.
type templateKey struct{ namespace, kind, name string }

func fromObjects(objs []client.Object) planInputs {
	in := planInputs{secrets: map[string]*corev1.Secret{}, templates: map[templateKey]*unstructured.Unstructured{}}
	var nodeLabels []map[string]string
	for _, o := range objs {
		switch t := o.(type) {
		case *configv1.Infrastructure:
			in.infra = t
		case *configv1.FeatureGate:
			in.featureGate = t
		case *configv1.ClusterVersion:
			in.version = t
		case *operatorv1.MachineConfiguration:
			in.mc = t
		case *corev1.ConfigMap:
			if t.Name == kube.BootImagesConfigMapName {
				in.bootImages = t
			}
		case *machinev1beta1.MachineSet:
			in.machineSets = append(in.machineSets, t)
		case *machinev1.ControlPlaneMachineSet:
			in.cpms = append(in.cpms, t)
		case *corev1.Secret:
			in.secrets[t.Name] = t
		case *corev1.Node:
			nodeLabels = append(nodeLabels, t.Labels)
		case *mcfgv1.MachineConfigPool:
			in.pools = append(in.pools, *t)
		case *mcfgv1.OSImageStream:
			if t.Name == kube.OSImageStreamName {
				in.osImageStream = t
			}
		case *unstructured.Unstructured:
			switch {
			case t.GroupVersionKind().Group == bootimage.InfrastructureGroup:
				in.templates[templateKey{t.GetNamespace(), t.GetKind(), t.GetName()}] = t
			case t.GetNamespace() == bootimage.ClusterAPINamespace:
				in.clusterAPI = append(in.clusterAPI, t)
			}
		}
	}
	// Without a control-plane node in the input, the plan assumes this machine's architecture.
	in.controlPlaneArch = bootimage.ControlPlaneArch(nodeLabels, runtime.GOARCH)
	return in
}

// fromCluster reads the plan's inputs from a cluster.
func fromCluster(ctx context.Context, c client.Client) (planInputs, error) {
	var objs []client.Object
	singletons := []struct {
		key client.ObjectKey
		obj client.Object
	}{
		{client.ObjectKey{Name: "cluster"}, &configv1.Infrastructure{}},
		{client.ObjectKey{Name: "cluster"}, &configv1.FeatureGate{}},
		{client.ObjectKey{Name: "version"}, &configv1.ClusterVersion{}},
		{client.ObjectKey{Name: "cluster"}, &operatorv1.MachineConfiguration{}},
		{client.ObjectKey{Namespace: kube.MCONamespace, Name: kube.BootImagesConfigMapName}, &corev1.ConfigMap{}},
		{client.ObjectKey{Namespace: kube.MachineAPINamespace, Name: cpms.Name}, &machinev1.ControlPlaneMachineSet{}},
	}
	for _, s := range singletons {
		err := c.Get(ctx, s.key, s.obj)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return planInputs{}, err
		}
		objs = append(objs, s.obj)
	}
	sets := &machinev1beta1.MachineSetList{}
	if err := c.List(ctx, sets, client.InNamespace(kube.MachineAPINamespace)); err != nil {
		return planInputs{}, err
	}
	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets, client.InNamespace(kube.MachineAPINamespace)); err != nil {
		return planInputs{}, err
	}
	for i := range sets.Items {
		objs = append(objs, &sets.Items[i])
	}
	for i := range secrets.Items {
		objs = append(objs, &secrets.Items[i])
	}
	clusterAPI, err := clusterAPIFromCluster(ctx, c)
	if err != nil {
		return planInputs{}, err
	}
	in := fromObjects(append(objs, clusterAPI...))
	arch, err := kube.ControlPlaneArch(ctx, c, runtime.GOARCH)
	if err != nil {
		return planInputs{}, err
	}
	// The operator's own read, so a live plan cannot choose another OS stream.
	if in.pools, in.osImageStream, err = kube.OSStreamInputs(ctx, c); err != nil {
		return planInputs{}, err
	}
	in.controlPlaneArch, in.live = arch, true
	return in, nil
}

// clusterAPIFromCluster reads the Cluster API MachineSets and MachineDeployments of
// openshift-cluster-api and the template each names, as the operator reads them; none when the
// Cluster API is not served.
func clusterAPIFromCluster(ctx context.Context, c client.Client) ([]client.Object, error) {
	var objs []client.Object
	for _, kind := range []string{bootimage.KindMachineSet, bootimage.KindMachineDeployment} {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(bootimage.ClusterAPIGroupVersion.String())
		list.SetKind(kind + "List")
		err := c.List(ctx, list, client.InNamespace(bootimage.ClusterAPINamespace))
		if apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			owner := &list.Items[i]
			objs = append(objs, owner)
			t, err := capi.Template(ctx, c.RESTMapper(), c, owner)
			if err != nil {
				return nil, err
			}
			if t != nil {
				objs = append(objs, t)
			}
		}
	}
	return objs, nil
}

// clusterAPIObject reduces a Cluster API MachineSet or MachineDeployment with its template and,
// for a MachineSet, the authority of its Machine API twin, as the operator's reconciler does.
func (in planInputs) clusterAPIObject(owner *unstructured.Unstructured) bootimage.Object {
	var template *unstructured.Unstructured
	if ref, err := bootimage.InfrastructureRef(owner); err == nil {
		template = in.templates[templateKey{owner.GetNamespace(), ref.Kind, ref.Name}]
	}
	var twin *machinev1beta1.MachineAuthority
	if owner.GetKind() == bootimage.KindMachineSet {
		for _, ms := range in.machineSets {
			if ms.Namespace == bootimage.MachineAPINamespace && ms.Name == owner.GetName() {
				twin = &ms.Status.AuthoritativeAPI
			}
		}
	}
	return bootimage.ClusterAPIObject(owner, template, twin)
}

// Plan is the output of `bootimagectl plan`.
type Plan struct {
	Items   []bootimage.Decision `json:"items"`
	Summary bootimage.Summary    `json:"summary"`
	// Notes say once what the plan cannot see as the operator does, rather than once per item.
	Notes []string `json:"notes,omitempty"`
	// degraded says the operator would report BootImageUpdateDegraded beyond the items' errors.
	degraded bool
}

// missing names, once each, the inputs the operator reads that are not among in, and what the
// operator does without them. MachineConfiguration on a cluster is said by selection.
func (in planInputs) missing() []string {
	var notes []string
	if in.featureGate == nil {
		notes = append(notes, "No FeatureGate/cluster: the feature gates are unknown")
	}
	if in.version == nil {
		notes = append(notes, "No ClusterVersion/version: the operator reports BootImageUpdateDegraded, since it cannot tell whether the cluster is updating nor which release it was installed with; the release version is --release-version or "+kube.ReleaseVersionEnv+" alone")
	}
	if in.bootImages == nil {
		notes = append(notes, fmt.Sprintf("No ConfigMap %s/%s: there is no stream to update to", kube.MCONamespace, kube.BootImagesConfigMapName))
	}
	if !in.live && len(in.pools) == 0 && in.osImageStream == nil && in.bootImages != nil && in.bootImages.Data["streams"] != "" {
		notes = append(notes, "No MachineConfigPools nor OSImageStream/cluster among the inputs: objects without the "+bootimage.OSStreamLabel+" label are planned as "+bootimage.LegacyOSStream+", where the operator takes their pool's OS stream")
	}
	if in.mc == nil && !in.live {
		notes = append(notes, "No MachineConfiguration/cluster among the inputs: planned with the default selection")
	}
	// The twin's status.authoritativeAPI decides a mirrored MachineSet (AuthorityMachineAPI,
	// Migrating): say which were planned without one.
	for _, name := range in.missingTwins() {
		notes = append(notes, fmt.Sprintf("No MachineSet %s/%s: the Cluster API one is planned as having no twin", bootimage.MachineAPINamespace, name))
	}
	return notes
}

// missingTwins names, from files, the Cluster API MachineSets whose Machine API twin is not among
// the inputs: a live plan reads the twin from the cluster, where its absence means there is none.
func (in planInputs) missingTwins() []string {
	if in.live {
		return nil
	}
	present := map[string]bool{}
	for _, ms := range in.machineSets {
		if ms.Namespace == bootimage.MachineAPINamespace {
			present[ms.Name] = true
		}
	}
	var names []string
	for _, o := range in.clusterAPI {
		if o.GetKind() == bootimage.KindMachineSet && o.GetNamespace() == bootimage.ClusterAPINamespace && !present[o.GetName()] {
			names = append(names, o.GetName())
		}
	}
	sort.Strings(names)
	return names
}

// plan decides for every MachineSet and ControlPlaneMachineSet with the operator's code.
func plan(ctx context.Context, in planInputs, releaseVersion string, clouds bootimage.Clouds) (Plan, error) {
	if in.infra == nil {
		return Plan{}, fmt.Errorf("no Infrastructure cluster among the inputs: the platform is unknown")
	}
	objs := bootimage.ClusterObjects{Infrastructure: in.infra, ClusterVersion: in.version, BootImages: in.bootImages, Clouds: clouds, ControlPlaneArch: in.controlPlaneArch,
		Pools: in.pools, OSImageStream: in.osImageStream}
	var out Plan
	out.Notes = in.missing()
	// As the operator: the ClusterVersion is missing (BootImageUpdateDegraded), whatever else holds.
	out.degraded = in.version == nil
	version, err := kube.ReleaseVersion(releaseVersion, in.version)
	switch {
	case in.featureGate == nil:
		objs.GatesError = fmt.Errorf("FeatureGate/cluster not found: feature gates unknown")
	case err != nil:
		objs.GatesError = err
	default:
		g, err := featuregates.FromFeatureGate(in.featureGate, version)
		objs.GatesError = err
		if err == nil {
			objs.Gates = g
		}
	}
	if objs.GatesError != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("Feature gates unknown (%v): the operator updates nothing then, and says so with Event FeatureGatesUnknown", objs.GatesError))
	}
	var note string
	objs.Effective, note = in.selection(objs.Gates)
	if note != "" {
		out.Notes = append(out.Notes, note)
	}
	if in.vcenters != nil {
		objs.Clouds = maps.Clone(objs.Clouds)
		if objs.Clouds == nil {
			objs.Clouds = bootimage.Clouds{}
		}
		objs.Clouds[configv1.VSpherePlatformType] = in.vcenters
	}
	cluster := bootimage.NewCluster(objs)

	// decide runs the operator's decision for one object; refine applies the CPMS rules.
	// The CLI remembers nothing between runs: the attempts annotation alone counts (zero Memory).
	decide := func(obj bootimage.Object, refine func(bootimage.Decision, bootimage.Attempts) bootimage.Decision) {
		obj.UserData = in.userData(obj.ProviderSpec)
		d, err := bootimage.Decide(ctx, cluster, obj)
		if err != nil {
			// As the operator does once its retries are spent: this row is an Error, the rest go on.
			d = bootimage.CloudLookupFailed(d, err)
		}
		if d.Current == "" {
			// Decisions taken before the image is read still show which image the object keeps.
			d.Current = bootimage.CurrentImage(cluster.Platform, obj.ProviderSpec)
		}
		if refine != nil {
			d = refine(d, obj.NextAttempts(cluster, d.Target))
		}
		out.Items = append(out.Items, d)
		out.Summary.Add(d)
	}
	for _, ms := range in.machineSets {
		decide(bootimage.MachineSetObject(ms), nil)
	}
	// As the operator, which starts its Cluster API controllers only while the gate is on.
	if objs.Gates != nil && objs.Gates.Enabled(featuregates.ManagedBootImagesAWSCAPI) {
		for _, owner := range in.clusterAPI {
			decide(in.clusterAPIObject(owner), nil)
		}
	}
	for _, c := range in.cpms {
		decide(cpms.Object(c), func(d bootimage.Decision, next bootimage.Attempts) bootimage.Decision { return cpms.Decide(c, d, next) })
	}
	sort.SliceStable(out.Items, func(i, j int) bool {
		a, b := out.Items[i], out.Items[j]
		return a.Kind+"/"+a.Namespace+"/"+a.Name < b.Kind+"/"+b.Namespace+"/"+b.Name
	})
	// As the operator's Warning OSStreamMismatch.
	for _, d := range out.Items {
		if d.StreamNote != "" {
			out.Notes = append(out.Notes, fmt.Sprintf("%s boots OS stream %s, but %s", resourceName(d), d.Stream, d.StreamNote))
		}
	}
	if out.Items == nil {
		out.Items = []bootimage.Decision{}
	}
	return out, nil
}

// selection returns the boot image configuration in force. On a cluster it is the one the
// operator decides by, MachineConfiguration status.managedBootImagesStatus; from files, or while
// that status is not computed for the current spec, it is computed from spec as the operator
// computes it, and on a cluster a note says so.
func (in planInputs) selection(gates bootimage.Gates) (operatorv1.ManagedBootImages, string) {
	mc := in.mc
	if in.live && mc != nil && mc.Status.ObservedGeneration == mc.Generation {
		return mc.Status.ManagedBootImagesStatus, ""
	}
	var note string
	switch {
	case in.live && mc == nil:
		note = "No MachineConfiguration/cluster: the operator decides nothing until it exists; shown with the default selection"
	case in.live:
		note = fmt.Sprintf("MachineConfiguration/cluster status is not computed for generation %d yet (observed %d): the operator decides nothing until it is; shown with the selection computed from spec", mc.Generation, mc.Status.ObservedGeneration)
	}
	var spec operatorv1.ManagedBootImages
	if mc != nil {
		spec = mc.Spec.ManagedBootImages
	}
	if gates == nil {
		return operatorv1.ManagedBootImages{}, note // nothing gated acts: no selection is needed
	}
	return bootimage.EffectiveConfiguration(spec, bootimage.PlatformOf(in.infra), gates).Status, note
}

func (in planInputs) userData(providerSpec []byte) *bootimage.UserData {
	name := bootimage.UserDataSecretName(providerSpec)
	if name == "" {
		return nil
	}
	if s, ok := in.secrets[name]; ok {
		return &bootimage.UserData{SecretName: name, Found: true, Data: s.Data["userData"]}
	}
	if in.live {
		return &bootimage.UserData{SecretName: name}
	}
	return nil // not given: not checked
}

func printPlan(w io.Writer, p Plan, format string) error {
	switch format {
	case "json", "yaml":
		return printStructured(w, p, format)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if format == "wide" {
		fmt.Fprintln(tw, "KIND\tNAME\tPLATFORM\tARCH\tSTREAM\tACTION\tREASON\tCURRENT\tTARGET\tMESSAGE")
		for _, d := range p.Items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", strings.TrimSuffix(d.Kind+"."+d.APIGroup, "."), d.Name, d.Platform, orDash(d.Arch), orDash(d.Stream), d.Action, d.Reason, orDash(d.Current), orDash(d.Target), d.Message)
		}
	} else {
		// Fits 120 columns for the usual names: kind and name as kubectl's resource/name, RHCOS GCP
		// images by name; the message is in -o wide.
		fmt.Fprintln(tw, "NAME\tACTION\tREASON\tCURRENT\tTARGET")
		for _, d := range p.Items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", resourceName(d), d.Action, d.Reason, orDash(shortImage(d.Current)), orDash(shortImage(d.Target)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := p.Summary
	if _, err := fmt.Fprintf(w, "\n%d to update, %d up to date, %d skipped, %d errors\n", s.Update, s.NoChange, s.Skip, s.Error); err != nil {
		return err
	}
	for _, d := range p.Items {
		// Said under the table too: the row's message is in -o wide only.
		if format == "table" && d.Action == bootimage.Update && d.Rolls != nil {
			if _, err := fmt.Fprintf(w, "%s rolls %d machines: all its Machines are replaced\n", resourceName(d), *d.Rolls); err != nil {
				return err
			}
		}
	}
	if format == "table" && s.Error+s.Skip > 0 {
		if _, err := fmt.Fprintln(w, "Why each was skipped or failed: -o wide"); err != nil {
			return err
		}
	}
	for _, n := range p.Notes {
		if _, err := fmt.Fprintf(w, "Note: %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// resourceName names d's object as kubectl does: kind/name, with the API group for Cluster API
// objects, whose kinds the Machine API shares.
func resourceName(d bootimage.Decision) string {
	kind := strings.ToLower(d.Kind)
	if d.APIGroup == string(bootimage.ClusterAPIGroup) {
		kind += "." + d.APIGroup
	}
	return kind + "/" + d.Name
}

// shortImage drops the project path of an RHCOS GCP image, the one long image form.
func shortImage(image string) string {
	return strings.TrimPrefix(image, gcp.RHCOSGCPImagePrefix+"/")
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
