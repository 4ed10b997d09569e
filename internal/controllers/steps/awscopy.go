package steps

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
)

// An object waiting for an AMI copy looks at its state again after a tenth of the copy's age,
// between minCopyPoll and maxCopyPoll: a copy takes minutes, so the wait past its end stays within
// a tenth of its length, and every object waiting shares one DescribeImages per lookup TTL.
const (
	minCopyPoll = 2 * time.Second
	maxCopyPoll = 30 * time.Second
)

// AWSCopy holds back an AWS update until its AMI copy is available. It makes the copy when none is
// under way (the copier sends one CopyImage per copy, whatever the number of objects asking), then
// waits, patching nothing, and reports nothing until the copy is available: the object counts as
// being updated. It returns the decision to go on with (a refusal or an overdue copy, reported as
// any decision), or the result to return.
func (s BootImages) AWSCopy(ctx context.Context, in LoadedInputs, live client.Object, obj bootimage.Object, d bootimage.Decision) (bootimage.Decision, *ctrl.Result, error) {
	c := aws.CopyOf(d)
	if d.Action != bootimage.Update || c == nil {
		return d, nil, nil
	}
	if overdue, ok := aws.CopyOverdue(d, s.Clock.Now()); ok {
		return overdue, nil, nil
	}
	if c.ImageID == "" {
		copier, _ := in.Cluster.Cloud.(aws.Copier)
		if copier == nil {
			return aws.NoCopyCredentials(d), nil, nil
		}
		id, err := copier.Copy(ctx, *c)
		var f *cloud.Failure
		switch {
		case errors.Is(err, bootimage.ErrNoCatalog):
			return aws.NoCopyCredentials(d), nil, nil
		case errors.As(err, &f):
			if refused, ok := aws.CopyRefused(d, f.Code, cloud.CleanMessage(f.Message)); ok {
				return refused, nil, nil
			}
		}
		if err != nil {
			res, err := s.cloudFailed(ctx, in, live, obj, d, err)
			return d, &res, err
		}
		if s.AMICopies.first(id) {
			logf.FromContext(ctx).Info("Copying AMI", "sourceAMI", c.SourceAMI, "sourceRegion", c.SourceRegion, "region", c.Region, "arch", c.Arch, "release", c.Release, "image", id)
			s.Recorder.Eventf(live, corev1.EventTypeNormal, ReasonCopyingImage, "Copying AMI %s from %s into %s as %s (RHCOS %s, %s); machines boot it once it is available", c.SourceAMI, c.SourceRegion, c.Region, id, c.Release, c.Arch)
		}
		c.ImageID = id
	}
	logf.FromContext(ctx).V(1).Info("Waiting for an AMI copy", "image", c.ImageID, "region", c.Region)
	return d, &ctrl.Result{RequeueAfter: s.copyPoll(ctx, c)}, nil
}

// copyPoll is when to look at copy c again.
func (s BootImages) copyPoll(ctx context.Context, c *aws.Copy) time.Duration {
	if p := seams.From(ctx).CopyPoll; p > 0 {
		return p
	}
	var age time.Duration
	if !c.Started.IsZero() {
		age = s.Clock.Now().Sub(c.Started)
	}
	return min(max(age/10, minCopyPoll), maxCopyPoll)
}

// CopyLog remembers the copies this process has announced, so a copy that a wave of objects waits
// for is said once.
type CopyLog struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether id is announced for the first time.
func (l *CopyLog) first(id string) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[id] {
		return false
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[id] = true
	return true
}
