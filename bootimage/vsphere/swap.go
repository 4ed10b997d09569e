package vsphere

import (
	"context"
	"fmt"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// SwapStep is one step of a template swap, named for what it does in vCenter.
type SwapStep string

// The steps of a swap of template T. Each is chosen from what vCenter holds under T and its two
// swap names (SwapNames), never from memory of an earlier run, so a swap interrupted after
// any step, by this operator or the MCO, is finished by the next one.
const (
	// SwapImport imports the stream's OVA under the importing name, after deleting whatever an
	// earlier, unverified import left there.
	SwapImport SwapStep = "import"
	// SwapRenameAway renames the outdated T to the replaced name.
	SwapRenameAway SwapStep = "rename-away"
	// SwapRenameIn renames the verified import to T.
	SwapRenameIn SwapStep = "rename-in"
	// SwapDeleteReplaced deletes the template renamed away.
	SwapDeleteReplaced SwapStep = "delete-replaced"
	// SwapRestore renames a template renamed away back to T: no verified import can take its place.
	SwapRestore SwapStep = "restore"
	// SwapDeleteImporting deletes an import left next to a T that is current already.
	SwapDeleteImporting SwapStep = "delete-importing"
)

// SwapState is what vCenter holds under a template's name and its two swap names; nil is
// no VM of that name.
type SwapState struct {
	Current, Replaced, Importing *Template
}

// Next returns the step that brings the state closer to a template of release under the
// template's name and nothing under the swap names; done when it is there.
func (s SwapState) Next(release string) (step SwapStep, done bool) {
	verified := s.Importing != nil && s.Importing.IsTemplate && s.Importing.Version == release
	switch {
	case s.Current == nil && s.Replaced != nil && verified:
		// Interrupted after renaming away: finishing forward leaves the name empty no longer.
		return SwapRenameIn, false
	case s.Current == nil && s.Replaced != nil:
		return SwapRestore, false
	case s.Replaced != nil:
		return SwapDeleteReplaced, false
	case s.Current != nil && s.Current.Version == release:
		if s.Importing != nil {
			return SwapDeleteImporting, false
		}
		return "", true
	case !verified:
		return SwapImport, false
	case s.Current != nil:
		return SwapRenameAway, false
	default:
		return SwapRenameIn, false
	}
}

// TemplateStore is what a template swap needs of vCenter: every VM it names is directly in
// the location's folder.
type TemplateStore interface {
	Templates
	ImportTemplate(ctx context.Context, imp Import, name, ovaPath, diskType string) error
	RenameTemplate(ctx context.Context, at Location, from, to string) error
	DestroyTemplate(ctx context.Context, at Location, name string) error
}

// Swapper makes a failure domain's template the stream's RHCOS release without a moment
// where a half-imported template carries the name MachineSets clone: the OVA is imported under a
// temporary name and verified, the old template is renamed away, the new one renamed in, and the
// old one deleted. The temporary names are the MCO's, so leftovers of either are recovered.
type Swapper struct {
	Store TemplateStore
	// OVA returns the path of a verified local copy of the OVA at location with checksum sha256.
	OVA func(ctx context.Context, location, sha256 string) (string, error)
	// NewDiskType is the disk provisioning of a template that replaces none (a new failure
	// domain); a replacement is provisioned as the template it replaces.
	NewDiskType func(ctx context.Context) (string, error)
	// AfterStep, when set, is called after each step; an error stops the swap there (a test seam).
	AfterStep func(context.Context, SwapStep) error
}

// maxSwapSteps bounds a swap: no state needs more than five steps (restore, import, rename away,
// rename in, delete), so more means vCenter does not do what it answers.
const maxSwapSteps = 8

// Swap makes template imp.Name current and returns the steps it took, none when it was current
// already (another MachineSet of the failure domain imported it).
func (s Swapper) Swap(ctx context.Context, imp Import) ([]SwapStep, error) {
	at := imp.Location
	importing, replaced := SwapNames(imp.Name)
	var steps []SwapStep
	for range maxSwapSteps {
		if err := ctx.Err(); err != nil {
			return steps, err
		}
		state, err := s.observe(ctx, at, imp.Name, replaced, importing)
		if err != nil {
			return steps, err
		}
		step, done := state.Next(imp.Release)
		if done {
			return steps, nil
		}
		if step == SwapImport && len(steps) > 0 && steps[len(steps)-1] == SwapImport {
			return steps, fmt.Errorf("imported %s from OVA %s (sha256 %s) is not a template of RHCOS %s; left for the next attempt to replace", importing, imp.OVALocation, imp.OVASHA256, imp.Release)
		}
		if err := s.do(ctx, imp, step, state, importing, replaced); err != nil {
			return steps, err
		}
		steps = append(steps, step)
		if s.AfterStep != nil {
			if err := s.AfterStep(ctx, step); err != nil {
				return steps, err
			}
		}
	}
	return steps, fmt.Errorf("template %s in %s is not RHCOS %s after %v", imp.Name, at.Folder, imp.Release, steps)
}

func (s Swapper) observe(ctx context.Context, at Location, name, replaced, importing string) (SwapState, error) {
	var state SwapState
	for _, v := range []struct {
		name string
		into **Template
	}{{name, &state.Current}, {replaced, &state.Replaced}, {importing, &state.Importing}} {
		t, err := s.Store.Template(ctx, at, v.name)
		if err != nil {
			return state, err
		}
		*v.into = t
	}
	return state, nil
}

func (s Swapper) do(ctx context.Context, imp Import, step SwapStep, state SwapState, importing, replaced string) error {
	at := imp.Location
	switch step {
	case SwapImport:
		return s.importOVA(ctx, imp, state.Current, importing)
	case SwapRenameAway:
		return s.Store.RenameTemplate(ctx, at, imp.Name, replaced)
	case SwapRenameIn:
		return s.Store.RenameTemplate(ctx, at, importing, imp.Name)
	case SwapRestore:
		return s.Store.RenameTemplate(ctx, at, replaced, imp.Name)
	case SwapDeleteReplaced:
		return s.Store.DestroyTemplate(ctx, at, replaced)
	case SwapDeleteImporting:
		return s.Store.DestroyTemplate(ctx, at, importing)
	}
	return fmt.Errorf("unknown swap step %q", step)
}

func (s Swapper) importOVA(ctx context.Context, imp Import, current *Template, name string) error {
	if err := s.Store.DestroyTemplate(ctx, imp.Location, name); err != nil {
		return err
	}
	var diskType string
	if current != nil {
		diskType = current.DiskType
	} else if s.NewDiskType != nil {
		dt, err := s.NewDiskType(ctx)
		if err != nil {
			return err
		}
		diskType = dt
	}
	ova, err := s.OVA(ctx, imp.OVALocation, imp.OVASHA256)
	if err != nil {
		return err
	}
	return s.Store.ImportTemplate(ctx, imp, name, ova, diskType)
}

// Imported is the decision to record once the import asked for was made: now, taken on
// vCenter after the import, finds the template current. The import is the update: it is recorded
// as one (attempts, Event) as if the patch had been made with the import, from asked's template.
// A now that is not about the same target (the world moved on) is returned as it is.
func Imported(asked, now bootimage.Decision) bootimage.Decision {
	imp := ImportOf(asked)
	if asked.Target != now.Target || imp == nil {
		return now
	}
	switch {
	case now.Action == bootimage.Update && ImportOf(now) == nil:
		return now
	case now.Action == bootimage.NoChange:
		d := asked
		d.Prepare = nil
		return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "imported template %s as RHCOS %s in %s", imp.Name, imp.Release, imp.Folder)
	}
	return now
}
