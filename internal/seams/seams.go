// Package seams holds the operator's test seams. They travel in the context the manager gives its
// runnables (ctrl.Options.BaseContext), so no exported option or process global carries them and
// only this module's tests can set them.
package seams

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Hooks are the seams; nil fields do nothing.
type Hooks struct {
	// AfterTemplateStep runs after each step of a vSphere template swap; an error stops the swap
	// there.
	AfterTemplateStep func(step string) error
	// BeforeMigrationWrite runs just before a migration's patch is sent; an error stops the run.
	BeforeMigrationWrite func(ctx context.Context, migration string) error
	// BeforeOwnerPatch runs after a Cluster API owner's decision, just before its patch is sent.
	BeforeOwnerPatch func(ctx context.Context, owner client.Object) error

	// The operator's waits, shortened so that a spec need not sit through them; zero keeps the
	// default. CloudErrorGrace, CloudRetryInterval and CloudRecheckInterval time cloud failures
	// and cloud-dependent skips; ContestInterval is the window of the status writes' ration while
	// a second writer is seen (the ration itself is controllers.Options.ContestedWrites); CRDPollInterval is how often missing Machine API CRDs are
	// looked for. TemplateGCGrace is how old an unused Cluster API template copy must be to go,
	// and how often copies still kept are looked at again.
	CloudErrorGrace, CloudRetryInterval, CloudRecheckInterval time.Duration
	TemplateGCGrace                                           time.Duration
	ContestInterval                                           time.Duration
	CRDPollInterval                                           time.Duration
	// CopyPoll is how often an object waiting for an AMI copy looks at it again.
	CopyPoll time.Duration
}

type key struct{}

// With returns ctx carrying h.
func With(ctx context.Context, h Hooks) context.Context { return context.WithValue(ctx, key{}, h) }

// From returns the hooks ctx carries, none when it carries none.
func From(ctx context.Context) Hooks {
	h, _ := ctx.Value(key{}).(Hooks)
	return h
}

// AfterTemplateStep runs the AfterTemplateStep hook of ctx, if any.
func AfterTemplateStep(ctx context.Context, step string) error {
	if f := From(ctx).AfterTemplateStep; f != nil {
		return f(step)
	}
	return nil
}

// BeforeMigrationWrite runs the BeforeMigrationWrite hook of ctx, if any.
func BeforeMigrationWrite(ctx context.Context, migration string) error {
	if f := From(ctx).BeforeMigrationWrite; f != nil {
		return f(ctx, migration)
	}
	return nil
}

// BeforeOwnerPatch runs the BeforeOwnerPatch hook of ctx, if any.
func BeforeOwnerPatch(ctx context.Context, owner client.Object) error {
	if f := From(ctx).BeforeOwnerPatch; f != nil {
		return f(ctx, owner)
	}
	return nil
}
