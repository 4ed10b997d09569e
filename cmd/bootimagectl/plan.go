package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/vspherecloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
	"github.com/bootimage-operator/bootimage-operator/cpms"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/inputs"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// planInputs say where a plan reads its inputs: through one client.Reader, the cluster's or the
// files', with the operator's loader (package inputs), so that a plan reads what the operator
// reads the way it reads it.
type planInputs struct {
	// reader reads the inputs, and mapper maps the kinds of Cluster API template references.
	reader client.Reader
	mapper apimeta.RESTMapper
	// live says the reader is a cluster's, read whole: an object it lacks does not exist (rather
	// than was not given), and the selection in force is MachineConfiguration's status, as the
	// operator reads it (rather than computed from spec).
	live bool
	// infra and secrets (the Secrets of openshift-machine-api, by name) choose the image catalogue.
	infra   *configv1.Infrastructure
	secrets map[string]*corev1.Secret
	// vcenters reads vSphere templates on a live cluster; nil offline.
	vcenters *vspherecloud.VCenters
}

// fromObjects returns the inputs of a plan of the objects of files, read through an in-memory
// reader. An object of a namespaced kind the plan reads given without a namespace is taken to be
// where the operator reads that kind (kubectl would put it in the context's namespace instead).
func fromObjects(scheme *runtime.Scheme, objs []client.Object) (planInputs, error) {
	for _, o := range objs {
		if o.GetNamespace() != "" {
			continue
		}
		switch t := o.(type) {
		case *machinev1beta1.MachineSet, *machinev1.ControlPlaneMachineSet, *corev1.Secret:
			o.SetNamespace(kube.MachineAPINamespace)
		case *corev1.ConfigMap:
			if t.Name == kube.BootImagesConfigMapName {
				t.Namespace = kube.MCONamespace
			}
		}
	}
	r, err := inputs.NewObjects(scheme, objs)
	if err != nil {
		return planInputs{}, err
	}
	return readPlanInputs(context.Background(), r, r.RESTMapper(), false)
}

// fromCluster returns the inputs of a plan of a cluster: a snapshot of what the plan reads, read
// as files are, except that an object missing from it does not exist.
func fromCluster(ctx context.Context, c client.Client) (planInputs, error) {
	objs, err := snapshot(ctx, c)
	if err != nil {
		return planInputs{}, err
	}
	r, err := inputs.NewObjects(c.Scheme(), objs)
	if err != nil {
		return planInputs{}, err
	}
	return readPlanInputs(ctx, r, r.RESTMapper(), true)
}

// readPlanInputs reads through r what chooses the image catalogue; the rest is read by plan.
func readPlanInputs(ctx context.Context, r client.Reader, mapper apimeta.RESTMapper, live bool) (planInputs, error) {
	in := planInputs{reader: r, mapper: mapper, live: live, secrets: map[string]*corev1.Secret{}}
	var err error
	if in.infra, err = inputs.GetOptional(ctx, r, client.ObjectKey{Name: "cluster"}, &configv1.Infrastructure{}); err != nil {
		return planInputs{}, err
	}
	secrets := &corev1.SecretList{}
	if err := r.List(ctx, secrets, client.InNamespace(kube.MachineAPINamespace)); err != nil {
		return planInputs{}, err
	}
	for i := range secrets.Items {
		in.secrets[secrets.Items[i].Name] = &secrets.Items[i]
	}
	return in, nil
}

// loader is the operator's loader as a plan of in reads with it. The differences are the
// options: the selection (the operator decides nothing until MachineConfiguration's status is
// computed for its generation; a live plan then shows the selection computed from spec, and a plan
// from files always computes it from spec), and whether an object missing from the reader does
// not exist (a cluster) or was not given (files).
func (in planInputs) loader(releaseVersion string, clouds bootimage.Clouds) inputs.Loader {
	l := inputs.Loader{
		Reader: in.reader, Gates: kube.GateSource{Reader: in.reader, ReleaseVersion: releaseVersion},
		Namespace: kube.MCONamespace, Clouds: clouds, Selection: inputs.SelectionSpec, Complete: in.live,
	}
	if in.live {
		l.Selection = inputs.SelectionStatusOrSpec
	}
	if in.vcenters != nil {
		l.Clouds = maps.Clone(clouds)
		if l.Clouds == nil {
			l.Clouds = bootimage.Clouds{}
		}
		l.Clouds[configv1.VSpherePlatformType] = in.vcenters
	}
	return l
}

// planObjects are the objects a plan decides for, read through in's reader as the operator's
// controllers read them.
type planObjects struct {
	machineSets []*machinev1beta1.MachineSet
	cpms        *machinev1.ControlPlaneMachineSet
	// clusterAPI are the Cluster API MachineSets and MachineDeployments of openshift-cluster-api
	// with their templates and twins.
	clusterAPI []inputs.ClusterAPIInputs
}

// objects reads the MachineSets and the ControlPlaneMachineSet of openshift-machine-api and, where
// the Cluster API is served, its objects of openshift-cluster-api with the inputs of each.
func (in planInputs) objects(ctx context.Context) (planObjects, error) {
	var out planObjects
	sets := &machinev1beta1.MachineSetList{}
	if err := in.reader.List(ctx, sets, client.InNamespace(kube.MachineAPINamespace)); err != nil {
		return out, err
	}
	for i := range sets.Items {
		out.machineSets = append(out.machineSets, &sets.Items[i])
	}
	var err error
	if out.cpms, err = inputs.GetOptional(ctx, in.reader, client.ObjectKey{Namespace: kube.MachineAPINamespace, Name: cpms.Name}, &machinev1.ControlPlaneMachineSet{}); err != nil {
		return out, err
	}
	capiReader := inputs.ClusterAPI{Reader: in.reader, Mapper: in.mapper, MachineAPI: in.reader, Pause: true}
	for _, kind := range []string{bootimage.KindMachineSet, bootimage.KindMachineDeployment} {
		owners, err := capiReader.Owners(ctx, kind)
		if err != nil {
			return out, err
		}
		for _, owner := range owners {
			read, err := capiReader.Read(ctx, owner)
			if err != nil {
				return out, err
			}
			out.clusterAPI = append(out.clusterAPI, read)
		}
	}
	return out, nil
}

// planJob is one object a plan decides for, refine the rules of its kind after bootimage.Decide.
type planJob struct {
	obj    bootimage.Object
	refine func(bootimage.Decision, bootimage.Attempts) bootimage.Decision
	// canary is the name the operator gives obj as a canary of its API family, "" for none: a
	// Machine API MachineSet's name, a Cluster API object's kind and name.
	canary string
}

// jobs are the objects of o a plan decides for, the Cluster API's only while gates enable the
// operator's Cluster API controllers.
func (o planObjects) jobs(gates bootimage.Gates) []planJob {
	var out []planJob
	for _, ms := range o.machineSets {
		j := planJob{obj: bootimage.MachineSetObject(ms)}
		if j.obj.IsCanary() {
			j.canary = ms.Name
		}
		out = append(out, j)
	}
	if gates != nil && gates.Enabled(featuregates.ManagedBootImagesAWSCAPI) {
		for _, capi := range o.clusterAPI {
			// As the operator: a paused object or Cluster is left alone.
			j := planJob{obj: capi.Object, refine: func(d bootimage.Decision, _ bootimage.Attempts) bootimage.Decision {
				return clusterapi.Paused(d, capi.Owner, capi.Cluster)
			}}
			if j.obj.IsCanary() {
				j.canary = j.obj.Kind + " " + j.obj.Name
			}
			out = append(out, j)
		}
	}
	if c := o.cpms; c != nil {
		// The operator reads no ControlPlaneMachineSet as a canary.
		out = append(out, planJob{obj: cpms.Object(c), refine: func(d bootimage.Decision, next bootimage.Attempts) bootimage.Decision { return cpms.Decide(c, d, next) }})
	}
	return out
}

// Plan is the output of `bootimagectl plan`.
type Plan struct {
	Items   []bootimage.Decision `json:"items"`
	Summary bootimage.Summary    `json:"summary"`
	// Copies are the AMI copies the operator makes, or waits for, before the updates that boot them.
	Copies []PlannedCopy `json:"copies,omitempty"`
	// Notes say once what the plan cannot see as the operator does, rather than once per item.
	Notes []string `json:"notes,omitempty"`
	// degraded says the operator would report BootImageUpdateDegraded beyond the items' errors.
	degraded bool
}

// missing names, once each, the inputs the operator reads that are not among loaded, and what the
// operator does without them. MachineConfiguration on a cluster is said by selectionNote.
func (in planInputs) missing(loaded inputs.Inputs, featureGate bool, objs planObjects) []string {
	var notes []string
	o := loaded.Objects
	if !featureGate {
		notes = append(notes, "No FeatureGate/cluster: the feature gates are unknown")
	}
	if o.ClusterVersion == nil {
		notes = append(notes, "No ClusterVersion/version: the operator reports BootImageUpdateDegraded, since it cannot tell whether the cluster is updating nor which release it was installed with; the release version is --release-version or "+kube.ReleaseVersionEnv+" alone")
	}
	if o.BootImages == nil {
		notes = append(notes, fmt.Sprintf("No ConfigMap %s/%s: there is no stream to update to", kube.MCONamespace, kube.BootImagesConfigMapName))
	}
	if !in.live && len(o.Pools) == 0 && o.OSImageStream == nil && o.BootImages != nil && o.BootImages.Data["streams"] != "" {
		notes = append(notes, "No MachineConfigPools nor OSImageStream/cluster among the inputs: objects without the "+bootimage.OSStreamLabel+" label are planned as "+bootimage.LegacyOSStream+", where the operator takes their pool's OS stream")
	}
	if loaded.MachineConfiguration == nil && !in.live {
		notes = append(notes, "No MachineConfiguration/cluster among the inputs: planned with the default selection")
	}
	// The twin's status.authoritativeAPI decides a mirrored MachineSet (AuthorityMachineAPI,
	// Migrating): say which were planned without one.
	for _, name := range in.missingTwins(objs) {
		notes = append(notes, fmt.Sprintf("No MachineSet %s/%s: the Cluster API one is planned as having no twin", bootimage.MachineAPINamespace, name))
	}
	return notes
}

// missingTwins names, from files, the Cluster API MachineSets whose Machine API twin is not among
// the inputs: a live plan reads the twin from the cluster, where its absence means there is none.
func (in planInputs) missingTwins(objs planObjects) []string {
	if in.live {
		return nil
	}
	var names []string
	for _, o := range objs.clusterAPI {
		if o.Object.Kind == bootimage.KindMachineSet && o.Twin == nil {
			names = append(names, o.Object.Name)
		}
	}
	sort.Strings(names)
	return names
}

// plan decides for every MachineSet and ControlPlaneMachineSet with the operator's code, on the
// inputs the operator's loader reads through in's reader.
func plan(ctx context.Context, in planInputs, releaseVersion string, clouds bootimage.Clouds) (Plan, error) {
	if in.infra == nil {
		return Plan{}, fmt.Errorf("no Infrastructure cluster among the inputs: the platform is unknown")
	}
	loader := in.loader(releaseVersion, clouds)
	loaded, err := loader.Load(ctx)
	if err != nil {
		return Plan{}, err
	}
	featureGate, err := inputs.GetOptional(ctx, in.reader, client.ObjectKey{Name: "cluster"}, &configv1.FeatureGate{})
	if err != nil {
		return Plan{}, err
	}
	objects, err := in.objects(ctx)
	if err != nil {
		return Plan{}, err
	}
	cluster := loaded.Cluster
	var out Plan
	out.Notes, out.degraded = in.notes(loaded, featureGate != nil, objects)

	// decide runs the operator's decision for one object, waiting for canaries as the operator
	// does; refine applies the CPMS rules. The CLI remembers nothing between runs: the attempts
	// annotation alone counts (no Object.Patched).
	decide := func(j planJob, canaries bootimage.Canaries) (bootimage.Decision, error) {
		obj := j.obj
		var err error
		if obj.UserData, err = loader.UserData(ctx, obj.ProviderSpec); err != nil {
			return bootimage.Decision{}, err
		}
		c := cluster
		c.Canaries = canaries
		d, err := bootimage.Decide(ctx, c, obj)
		if err != nil {
			// As the operator does once its retries are spent: this row is an Error, the rest go on.
			d = bootimage.CloudLookupFailed(d, err)
		}
		if d.Current == "" {
			// Decisions taken before the image is read still show which image the object keeps.
			d.Current = bootimage.CurrentImage(cluster.Platform, obj)
		}
		if j.refine != nil {
			d = j.refine(d, obj.NextAttempts(cluster, d.Target))
		}
		out.Items = append(out.Items, d)
		out.Summary.Add(d)
		return d, nil
	}
	// The canaries first, whose decisions wait for none, then the rest, each waiting for the
	// canaries of its API family only, as the operator's controllers read them.
	jobs := objects.jobs(loaded.Objects.Gates)
	canaries := map[bool]*bootimage.Canaries{false: {}, true: {}}
	for _, canaryPass := range []bool{true, false} {
		for _, j := range jobs {
			if (j.canary != "") != canaryPass {
				continue
			}
			family := j.obj.APIGroup == bootimage.ClusterAPIGroup
			d, err := decide(j, *canaries[family])
			if err != nil {
				return Plan{}, err
			}
			if canaryPass {
				canaries[family].NoteCanary(j.canary, j.obj.Annotations, d, true)
			}
		}
	}
	out.settle()
	return out, nil
}

// settle orders the decisions by object and adds what they say together: the AMI copies they wait
// for, and the notes of the Warning OSStreamMismatch the operator gives.
func (p *Plan) settle() {
	sort.SliceStable(p.Items, func(i, j int) bool {
		a, b := p.Items[i], p.Items[j]
		return a.Kind+"/"+a.Namespace+"/"+a.Name < b.Kind+"/"+b.Namespace+"/"+b.Name
	})
	p.Copies = plannedCopies(p.Items)
	for _, d := range p.Items {
		if d.StreamNote != "" {
			p.Notes = append(p.Notes, resourceName(d)+" "+d.StreamWarning())
		}
	}
	if p.Items == nil {
		p.Items = []bootimage.Decision{}
	}
}

// notes say once what the plan cannot see as the operator does, and degraded whether the
// operator reports BootImageUpdateDegraded beyond the items' errors.
func (in planInputs) notes(loaded inputs.Inputs, featureGate bool, objects planObjects) (notes []string, degraded bool) {
	objs := loaded.Objects
	notes = in.missing(loaded, featureGate, objects)
	// As the operator: the ClusterVersion is missing (BootImageUpdateDegraded), whatever else holds.
	degraded = objs.ClusterVersion == nil
	if objs.GatesError != nil {
		notes = append(notes, fmt.Sprintf("Feature gates unknown (%v): the operator updates nothing then, and says so with Event FeatureGatesUnknown", objs.GatesError))
	}
	// As the operator: an entry of streams that does not parse is broken input, said and degrading
	// whether or not an object boots that stream.
	if objs.BootImages != nil {
		if streams, err := bootimage.ParseBootImages(objs.BootImages); err == nil && len(streams.Invalid) > 0 {
			degraded = true
			for _, name := range slices.Sorted(maps.Keys(streams.Invalid)) {
				notes = append(notes, streams.Invalid[name].Error())
			}
		}
	}
	if note := in.selectionNote(loaded); note != "" {
		notes = append(notes, note)
	}
	return notes, degraded
}

// selectionNote says, on a cluster, when the selection shown is not the operator's: without
// MachineConfiguration/cluster, or while its status is not computed for the current spec, the
// operator decides nothing, and the plan shows the selection computed from spec as the operator
// will compute it. From files it is always computed from spec, and nothing is said.
func (in planInputs) selectionNote(loaded inputs.Inputs) string {
	mc := loaded.MachineConfiguration
	switch {
	case !in.live || loaded.InForce:
		return ""
	case mc == nil:
		return "No MachineConfiguration/cluster: the operator decides nothing until it exists; shown with the default selection"
	}
	return fmt.Sprintf("MachineConfiguration/cluster status is not computed for generation %d yet (observed %d): the operator decides nothing until it is; shown with the selection computed from spec", mc.Generation, mc.Status.ObservedGeneration)
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
	for _, c := range p.Copies {
		made := "to be made"
		if c.ImageID != "" {
			made = "pending as " + c.ImageID
		}
		if _, err := fmt.Fprintf(w, "Copy of %s from %s into %s (%s, RHCOS %s, %s), %s, then booted by %s\n", c.SourceAMI, c.SourceRegion, c.Region, c.Arch, c.Release, c.OSStream, made, strings.Join(c.Objects, ", ")); err != nil {
			return err
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

// PlannedCopy is an AMI copy the operator makes (or waits for, ImageID) before the objects that
// will boot it are updated.
type PlannedCopy struct {
	SourceAMI    string   `json:"sourceAMI"`
	SourceRegion string   `json:"sourceRegion"`
	Region       string   `json:"region"`
	Arch         string   `json:"arch"`
	Release      string   `json:"release"`
	OSStream     string   `json:"osStream"`
	ImageID      string   `json:"imageId,omitempty"`
	Objects      []string `json:"objects"`
}

// plannedCopies gathers the copies items ask for, one per source and region, in order of first use.
func plannedCopies(items []bootimage.Decision) []PlannedCopy {
	var out []PlannedCopy
	at := map[string]int{}
	for _, d := range items {
		c := aws.CopyOf(d)
		if c == nil || d.Action != bootimage.Update {
			continue
		}
		i, ok := at[c.Key()]
		if !ok {
			i, at[c.Key()] = len(out), len(out)
			out = append(out, PlannedCopy{SourceAMI: c.SourceAMI, SourceRegion: c.SourceRegion, Region: c.Region, Arch: c.Arch, Release: c.Release, OSStream: c.OSStream, ImageID: c.ImageID})
		}
		out[i].Objects = append(out[i].Objects, resourceName(d))
	}
	return out
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
