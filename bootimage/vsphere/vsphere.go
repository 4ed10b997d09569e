// Package vsphere decides vSphere MachineSets' boot images: the template of the stream's OVA, and
// the steps that import it and swap it in (Swapper), through the Templates interface that
// bootimage/cloud/vspherecloud implements with vCenter.
package vsphere

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// maxNameLength is the longest name vSphere accepts for a VM.
const maxNameLength = 80

// Location is a workspace folder in one vCenter datacenter.
type Location struct {
	Server string
	// Port is the vCenter's HTTPS port, 0 for the default.
	Port       int32
	Datacenter string
	// Folder is the absolute inventory path of the cluster's workspace folder.
	Folder string
}

// Template is what the operator reads of a VM template.
type Template struct {
	// Path is the template's inventory path.
	Path string
	// Version is the RHCOS version of its vApp product (the OVA's product section); "" when none.
	Version string
	// DiskType is its disks' provisioning: thin, thick, eagerZeroedThick, or "" when unknown.
	DiskType string
	// IsTemplate is false for a VM that was not (yet) marked as a template.
	IsTemplate bool
}

// Templates reads VM templates in vCenter. bootimage/cloud/vspherecloud implements it with govmomi.
type Templates interface {
	// Template returns the VM named name directly inside at.Folder, nil when there is none:
	// a VM of that name anywhere else is not the cluster's and is never looked at.
	// ErrNoCatalog says there are no credentials for the vCenter.
	Template(ctx context.Context, at Location, name string) (*Template, error)
}

// Import is what an update must do in vCenter before the MachineSet is patched: import the
// stream's OVA as template Name in the failure domain, unless it is already there.
type Import struct {
	Location
	// Name is the template's name in Folder.
	Name           string
	ComputeCluster string
	ResourcePool   string
	Datastore      string
	Network        string
	// Release is the RHCOS version the template must have: the stream's artifacts.vmware.release.
	Release string
	// OVALocation and OVASHA256 are the stream's OVA.
	OVALocation, OVASHA256 string
	// InfrastructureName is the cluster's tag, attached as the installer does, with TagIDs.
	InfrastructureName string
	TagIDs             []string
}

// Key identifies the template an import writes: imports of one key must not run at once.
func (i Import) Key() string {
	return i.Server + "|" + i.Datacenter + "|" + path.Join(i.Folder, i.Name)
}

type vsphereWorkspace struct {
	Server       string `json:"server"`
	Datacenter   string `json:"datacenter"`
	Folder       string `json:"folder"`
	Datastore    string `json:"datastore"`
	ResourcePool string `json:"resourcePool"`
	VMGroup      string `json:"vmGroup"`
}

// platform decides the boot images of vsphere machines.
type platform struct{}

func init() { bootimage.Register(platform{}) }

// imageFailure: the vSphere machine controller's errors for a template it cannot clone: not
// found in vCenter, or not a template.
var imageFailure = regexp.MustCompile(`(?i)template[^:]*not found|unable to get template|is not a template`)

func (platform) Traits() bootimage.PlatformTraits {
	return bootimage.PlatformTraits{Type: configv1.VSpherePlatformType, MachineSetGate: featuregates.ManagedBootImagesVSphere, ImageFailure: imageFailure, InStream: func(a stream.Arch) bool {
		_, ok := a.Artifacts["vmware"]
		return ok
	}}
}

func (platform) Current(spec bootimage.MachineSpec) string {
	var template string
	_ = spec.Field("template", &template)
	return template
}

// decide compares the MachineSet's template with the stream's RHCOS release. The template the
// operator manages lives in the workspace folder: the one the MachineSet names if it is there,
// else <infrastructureName>-rhcos-<failure domain>, as the MCO names it.
func (platform) Decide(ctx context.Context, d bootimage.Decision, in bootimage.PlatformInput) (bootimage.Decision, error) {
	var template string
	if err := in.Spec.Field("template", &template); err != nil || template == "" {
		return in.Spec.Invalid(d, "template is missing or not a string"), nil
	}
	d.Current = template
	var ws *vsphereWorkspace
	var tagIDs []string
	if err := in.Spec.Field("workspace", &ws); err != nil {
		return in.Spec.Invalid(d, "%v", err), nil
	}
	if err := in.Spec.Field("tagIDs", &tagIDs); err != nil {
		return in.Spec.Invalid(d, "%v", err), nil
	}
	if ws == nil || ws.Server == "" || ws.Datacenter == "" || !strings.HasPrefix(ws.Folder, "/") {
		return in.Spec.Invalid(d, "workspace.server, datacenter and folder (an inventory path) must be set: the operator manages templates in the cluster's workspace folder only"), nil
	}
	vcenter, fd, ok := failureDomainOf(platformSpec(in.Cluster), *ws)
	if !ok {
		return d.With(bootimage.Skip, bootimage.ReasonFailureDomainMismatch, "providerSpec workspace (%s) matches no vCenter and failure domain of Infrastructure cluster spec.platformSpec.vsphere", ws), nil
	}
	art := in.Stream.Architectures[in.Arch].Artifacts["vmware"]
	ova := art.Formats["ova"].Disk
	if art.Release == "" || ova == nil || ova.Location == "" || ova.Sha256 == "" {
		return d.With(bootimage.Skip, bootimage.ReasonTargetImageUnavailable, "the %s stream has no vmware OVA with a release and sha256 for %s", in.OSStream, in.Arch), nil
	}
	at := Location{Server: vcenter.Server, Port: vcenter.Port, Datacenter: ws.Datacenter, Folder: path.Clean(ws.Folder)}
	templates, _ := in.Cluster.Cloud.(Templates)
	if templates == nil {
		return d.With(bootimage.Skip, bootimage.ReasonVCenterNotConsulted, "template %s: vCenter %s not consulted, so its RHCOS version is unknown; the stream's is %s (OVA %s)", template, at.Server, art.Release, ova.Location), nil
	}
	name, value, found, leftovers, otherStreams, err := chooseTemplate(ctx, templates, at, template, vsphereTemplateNames(in.Cluster.InfrastructureName, fd.Name, in.OSStream), art.Release)
	if err != nil {
		return vcenterError(d, at, name, err)
	}
	if name == "" {
		return d.With(bootimage.Skip, bootimage.ReasonOSStreamTemplateTaken, "every template name of the %s stream in %s holds another OS stream's template (%s): a template is never replaced by another RHEL major's; rename or remove it",
			in.OSStream, at.Folder, strings.Join(otherStreams, ", ")), nil
	}
	if found != nil && found.Version == "" {
		return d.With(bootimage.Skip, bootimage.ReasonCustomImage, "template %s has no RHCOS product version: not an RHCOS template, left alone", found.Path), nil
	}
	if found != nil {
		d.Current = fmt.Sprintf("%s@%s", template, found.Version)
	}
	d.Target = fmt.Sprintf("%s@%s", value, art.Release)
	if len(name) > maxNameLength {
		return d.With(bootimage.Error, bootimage.ReasonTemplateNameTooLong, "template name %s is longer than vSphere's %d characters", name, maxNameLength), nil
	}
	d.ProviderSpecPatch = []bootimage.PatchOp{bootimage.Set("/template", value)}
	if found != nil && found.Version == art.Release && len(leftovers) == 0 {
		if template == value {
			d.ProviderSpecPatch = nil
			return d.With(bootimage.NoChange, bootimage.ReasonUpToDate, "template %s is RHCOS %s, the stream's", found.Path, art.Release), nil
		}
		return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "template %s is not the cluster's; %s in the workspace folder is RHCOS %s, the stream's", template, found.Path, art.Release), nil
	}
	imp := &Import{
		Location: at, Name: name,
		ComputeCluster: fd.Topology.ComputeCluster, ResourcePool: fd.Topology.ResourcePool, Datastore: fd.Topology.Datastore,
		Release: art.Release, OVALocation: ova.Location, OVASHA256: ova.Sha256,
		InfrastructureName: in.Cluster.InfrastructureName, TagIDs: tagIDs,
	}
	if len(fd.Topology.Networks) > 0 {
		imp.Network = fd.Topology.Networks[0]
	}
	d.Prepare = imp
	if found == nil {
		return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "template %s is not in the workspace folder %s: importing the stream's OVA (RHCOS %s) as %s", template, at.Folder, art.Release, name), nil
	}
	if found.Version == art.Release {
		return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "template %s is RHCOS %s, the stream's, but an interrupted swap left %s: finishing it", found.Path, art.Release, strings.Join(leftovers, ", ")), nil
	}
	return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "template %s is RHCOS %s, the stream's is %s: importing its OVA", found.Path, found.Version, art.Release), nil
}

// chooseTemplate finds the template the object is to boot, first match wins: the template the
// MachineSet names (template), when it is in the folder, then the stream's own names. A template of
// another RHEL major than release is another stream's: never taken, only listed in otherStreams.
// name is "" when every name is taken; on err, name is the one being looked up.
func chooseTemplate(ctx context.Context, templates Templates, at Location, template string, names []string, release string) (name, value string, found *Template, leftovers, otherStreams []string, err error) {
	type candidate struct {
		name, value string
		own         bool
	}
	var candidates []candidate
	if !slices.Contains(names, template) && inFolder(at.Folder, template) {
		candidates = append(candidates, candidate{path.Base(template), template, true})
	}
	for _, n := range names {
		candidates = append(candidates, candidate{n, n, false})
	}
	for _, c := range candidates {
		t, left, err := managedTemplate(ctx, templates, at, c.name)
		if err != nil {
			return c.name, "", nil, nil, nil, err
		}
		if t == nil && c.own {
			continue // not there: the stream's names decide
		}
		if t != nil && t.Version != "" && !sameRHEL(t.Version, release) {
			otherStreams = append(otherStreams, fmt.Sprintf("%s (RHCOS %s)", t.Path, t.Version))
			continue
		}
		return c.name, c.value, t, left, otherStreams, nil
	}
	return "", "", nil, nil, otherStreams, nil
}

// vsphereTemplateNames are the names of the templates the operator manages for osStream in
// failure domain fd: for rhel-9 the MCO's <infrastructureName>-rhcos-<fd>, then, when a template
// of another stream holds that name (a 5.0 install's default stream), the stream-named one every
// other stream uses, <infrastructureName>-rhcos-<stream>-<fd>.
func vsphereTemplateNames(infrastructureName, fd, osStream string) []string {
	named := fmt.Sprintf("%s-rhcos-%s-%s", infrastructureName, osStream, fd)
	if osStream == bootimage.LegacyOSStream {
		return []string{fmt.Sprintf("%s-rhcos-%s", infrastructureName, fd), named}
	}
	return []string{named}
}

// sameRHEL reports whether two RHCOS versions are of one RHEL major; true when either cannot be read.
func sameRHEL(a, b string) bool {
	va, okA := bootimage.RHELVersion(a)
	vb, okB := bootimage.RHELVersion(b)
	return !okA || !okB || va.Major() == vb.Major()
}

// SwapNames are the names a template swap of name uses, the MCO's: the template being
// imported and the one being replaced. They have a fixed length, so they fit vSphere's limit.
func SwapNames(name string) (importing, replaced string) {
	h := sha256.Sum256([]byte(name))
	return fmt.Sprintf("mco-tmp-%x", h[:4]), fmt.Sprintf("mco-old-%x", h[:4])
}

// managedTemplate returns template name in at's folder, or the template an interrupted swap
// renamed away from it, and the swap's other leftovers.
func managedTemplate(ctx context.Context, templates Templates, at Location, name string) (*Template, []string, error) {
	importing, replaced := SwapNames(name)
	t, err := templates.Template(ctx, at, name)
	if err != nil {
		return nil, nil, err
	}
	old, err := templates.Template(ctx, at, replaced)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case t == nil && old != nil:
		return old, []string{replaced}, nil
	case t == nil:
		return nil, nil, nil
	case old != nil:
		return t, []string{replaced}, nil
	}
	// An import left behind next to an outdated template is reused by the next swap; next to a
	// current one it is a leftover to delete.
	next, err := templates.Template(ctx, at, importing)
	if err != nil || next == nil {
		return t, nil, err
	}
	return t, []string{importing}, nil
}

func vcenterError(d bootimage.Decision, at Location, name string, err error) (bootimage.Decision, error) {
	if errors.Is(err, bootimage.ErrNoCatalog) {
		return d.With(bootimage.Skip, bootimage.ReasonVCenterNotConsulted, "template %s: no credentials for vCenter %s (%v), so its RHCOS version is unknown", name, at.Server, err), nil
	}
	return d, fmt.Errorf("looking up template %s in vCenter %s folder %s: %w", name, at.Server, at.Folder, err)
}

// inFolder reports whether template, a bare name or an inventory path, names a VM directly
// inside folder.
func inFolder(folder, template string) bool {
	return !strings.HasPrefix(template, "/") || path.Dir(path.Clean(template)) == folder
}

// String names the fields a workspace is matched on.
func (w vsphereWorkspace) String() string {
	s := fmt.Sprintf("server: %s, datacenter: %s, datastore: %s, resourcePool: %s", w.Server, w.Datacenter, w.Datastore, w.ResourcePool)
	if w.VMGroup != "" {
		s += ", vmGroup: " + w.VMGroup
	}
	return s
}

// failureDomainOf returns the vCenter and failure domain the workspace belongs to: every field the
// CPMS operator compares must match (server, datacenter, datastore, resource pool, VM group).
func failureDomainOf(spec *configv1.VSpherePlatformSpec, ws vsphereWorkspace) (configv1.VSpherePlatformVCenterSpec, configv1.VSpherePlatformFailureDomainSpec, bool) {
	if spec == nil {
		return configv1.VSpherePlatformVCenterSpec{}, configv1.VSpherePlatformFailureDomainSpec{}, false
	}
	for _, vc := range spec.VCenters {
		if vc.Server != ws.Server {
			continue
		}
		for _, fd := range spec.FailureDomains {
			vmGroup := ""
			if fd.ZoneAffinity != nil && fd.ZoneAffinity.HostGroup != nil {
				vmGroup = fd.ZoneAffinity.HostGroup.VMGroup
			}
			if fd.Server == vc.Server && fd.Topology.Datacenter == ws.Datacenter && fd.Topology.Datastore == ws.Datastore &&
				vmGroup == ws.VMGroup && path.Clean(fd.Topology.ResourcePool) == path.Clean(ws.ResourcePool) {
				return vc, fd, true
			}
		}
	}
	return configv1.VSpherePlatformVCenterSpec{}, configv1.VSpherePlatformFailureDomainSpec{}, false
}

// platformSpec is Infrastructure cluster's spec.platformSpec.vsphere: vCenters and failure domains.
func platformSpec(c bootimage.Cluster) *configv1.VSpherePlatformSpec {
	if c.Infrastructure == nil {
		return nil
	}
	return c.Infrastructure.Spec.PlatformSpec.VSphere
}

// ImportOf returns the template import d asks for before its patch; nil when none.
func ImportOf(d bootimage.Decision) *Import {
	imp, _ := d.Prepare.(*Import)
	return imp
}
