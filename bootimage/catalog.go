package bootimage

import (
	"errors"

	configv1 "github.com/openshift/api/config/v1"
)

// ErrNoCatalog says a cloud's image catalogue is not available (no credentials): checks that need
// it are skipped, and decisions that cannot be made without it say so.
var ErrNoCatalog = errors.New("no image catalogue")

// Clouds are the cloud lookups a binary has, by platform: each value is the interface its
// platform's folder defines (aws.Images, gcp.Images, vsphere.Templates). A platform without an
// entry decides offline, as without credentials.
type Clouds map[configv1.PlatformType]any
