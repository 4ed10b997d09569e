package bootimage

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"
)

// Platform reads, chooses and writes the boot image of one cloud's machines. Each platform is a
// folder of bootimage/ that registers itself (Register) and one line of bootimage/platforms; the
// dispatcher (Decide) runs the checks every platform shares before it asks the platform.
type Platform interface {
	// Traits are what the dispatcher needs to know of the platform before it reads a spec.
	Traits() PlatformTraits
	// Current reads the boot image spec names, in the form of Decision.Current; "" when it names
	// none the platform can read.
	Current(spec MachineSpec) string
	// Decide reads the current image of in.Spec, chooses the target and, on Update, writes the
	// patch that sets it (Decision.ProviderSpecPatch, paths relative to the spec). It returns d
	// with its action, reason, current and target set. An error is transient: a cloud API call
	// failed, so try again later.
	Decide(ctx context.Context, d Decision, in PlatformInput) (Decision, error)
}

// PlatformTraits are the static facts of a platform.
type PlatformTraits struct {
	// Type is the Infrastructure platform type the platform decides for.
	Type configv1.PlatformType
	// MachineSetGate is the gate of older releases that turned MachineSet updates on; "" for none.
	MachineSetGate configv1.FeatureGateName
	// ControlPlane is true when the ControlPlaneMachineSet's boot image can be managed.
	ControlPlane bool
	// Arches are the RPM architectures the platform has boot images for; nil for all.
	Arches []string
	// TemplateKind is the Cluster API infrastructure machine template kind whose boot image the
	// platform manages; "" for none.
	TemplateKind string
	// InStream reports whether a stream architecture has boot images of the platform; nil when
	// that is not checked for the cluster as a whole.
	InStream func(stream.Arch) bool
	// Credentials is the Secret of openshift-machine-api its cloud lookups read; zero for none.
	Credentials Credentials
	// ClusterAPIProvider is the Go module of the Cluster API provider of TemplateKind, whose CRDs
	// the test harness serves at the version hack/tools/capi-crds pins; "" for none.
	ClusterAPIProvider string
	// ImageFailure matches the errors the platform's machine controllers report when the cloud
	// will not launch a boot image (one it does not have, or one the account or the instance may
	// not use): the evidence against a new image. Capacity, quota and network errors are not.
	ImageFailure *regexp.Regexp
}

// Credentials name a platform's credentials Secret and what is not looked up without it.
type Credentials struct {
	Secret  string
	Without string
}

// PlatformInput is what a platform decides on.
type PlatformInput struct {
	Spec MachineSpec
	// Arch is the machines' RPM architecture (x86_64, aarch64, ...), present in Stream.
	Arch string
	// Stream is the CoreOS stream of the object's OS stream, OSStream.
	Stream   *stream.Stream
	OSStream string
	Cluster  Cluster
}

// AzureStackHub is the platform decisions see for Azure with platformStatus.azure.cloudName
// AzureStackCloud. Its boot images are fixed at install, so, as the MCO's CheckBootImagePlatform
// says, nothing is managed there: no MachineSet or CPMS entry, Manual skew enforcement.
const AzureStackHub configv1.PlatformType = "AzureStackHub"

// PlatformOf returns the cluster's platform as boot image decisions see it: the Infrastructure's
// platform type, with Azure Stack Hub apart from public Azure (AzureStackHub).
func PlatformOf(infra *configv1.Infrastructure) configv1.PlatformType {
	//lint:ignore SA1019 older clusters set only this
	platform := infra.Status.Platform
	if ps := infra.Status.PlatformStatus; ps != nil {
		if ps.Type != "" {
			platform = ps.Type
		}
		if platform == configv1.AzurePlatformType && ps.Azure != nil && ps.Azure.CloudName == configv1.AzureStackCloud {
			return AzureStackHub
		}
	}
	return platform
}

// UnsupportedMessage says why boot images of resource are not managed on platform.
func UnsupportedMessage(resource string, platform configv1.PlatformType) string {
	if platform == AzureStackHub {
		return fmt.Sprintf("boot images of %s are not managed on Azure Stack Hub (Infrastructure status.platformStatus.azure.cloudName %s): its boot images are fixed at install", resource, configv1.AzureStackCloud)
	}
	return fmt.Sprintf("boot images of %s are not managed on platform %q", resource, platform)
}

// platforms are the registered platforms, by type. Registration happens in the platform
// packages' init functions, so it is complete before any decision.
var platforms = map[configv1.PlatformType]Platform{}

// Register makes p decide the boot images of its platform type. It panics on a second
// registration of one type: two folders claiming a platform is a build mistake.
func Register(p Platform) {
	t := p.Traits().Type
	if _, dup := platforms[t]; dup || t == "" {
		panic(fmt.Sprintf("bootimage: platform %q registered twice or without a type", t))
	}
	platforms[t] = p
}

// PlatformFor returns the registered platform of type t.
func PlatformFor(t configv1.PlatformType) (Platform, bool) {
	p, ok := platforms[t]
	return p, ok
}

// Platforms are the registered platforms, sorted by type: what the shipped admission policy's
// platform lists and the Cluster API Role are checked against.
func Platforms() []Platform {
	return slices.SortedFunc(maps.Values(platforms), func(a, b Platform) int {
		return cmp.Compare(a.Traits().Type, b.Traits().Type)
	})
}

// TemplateKinds are the infrastructure machine template kinds of the platforms managed on Cluster
// API, sorted.
func TemplateKinds() []string {
	var kinds []string
	for _, p := range platforms {
		if k := p.Traits().TemplateKind; k != "" {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	return kinds
}
