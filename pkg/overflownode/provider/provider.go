// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package provider is the contract between sluice-overflow-node and an
// external GPU provider. A provider only creates, deletes, gets and lists
// remote workloads by an id that sluice assigns, and reports its capacity
// and health; everything else (reconciliation, garbage collection, status
// translation, dispatch across providers) is written once in
// pkg/overflow/overflownode.
//
// A provider keeps, with every remote workload, the id, the overflow node
// that created it and the pod's namespace, name and UID. That is all the
// state there is: a restarted node rebuilds everything from the apiserver
// and the providers' listings.
package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

// Phase is where a remote workload is in its life.
type Phase string

// The phases, as a pod's.
const (
	Pending   Phase = "Pending"
	Running   Phase = "Running"
	Succeeded Phase = "Succeeded"
	Failed    Phase = "Failed"
)

// Valid reports whether p is one of the phases.
func (p Phase) Valid() bool {
	switch p {
	case Pending, Running, Succeeded, Failed:
		return true
	}
	return false
}

// PodRef names the home pod a remote workload runs.
type PodRef struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
}

func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

// Workload is a remote workload as its provider reports it.
type Workload struct {
	// ID is the id sluice assigned (IDFor).
	ID string `json:"id"`
	// Node is the overflow node that created it.
	Node string `json:"node"`
	// Pod is the home pod it runs.
	Pod PodRef `json:"pod"`
	// Phase and Ready: Ready means the remote side serves (all its
	// containers are ready); a pod is Ready at home only then.
	Phase Phase `json:"phase"`
	Ready bool  `json:"ready"`
	// Message says why, in the provider's words, when not Ready.
	Message string `json:"message,omitempty"`
	// StartedAt is when the remote workload started running.
	StartedAt *time.Time `json:"startedAt,omitempty"`
	// CreatedAt is when the provider created it: a warm instance not
	// adopted within the node's warm TTL of it is deleted, whichever
	// process of the node created it.
	CreatedAt *time.Time `json:"createdAt,omitempty"`
	// Addresses are the IPs (at most one IPv4 and one IPv6) at which the
	// workload's container ports are reachable from the home cluster's
	// network; the node reports them as the pod's podIPs, so Services
	// that select the pod send traffic there once it is Ready. Addresses
	// that cannot be pod IPs (UsableAddress) are dropped.
	Addresses []string `json:"addresses,omitempty"`
}

// LogOptions choose the lines Logs returns, as a pod log request does.
type LogOptions struct {
	// Tail is the number of last lines; 0 is all.
	Tail int
	// Follow streams new lines until the workload ends or ctx is done.
	Follow bool
	// Timestamps prefixes each line with its RFC 3339 time.
	Timestamps bool
	// Previous is the last terminated instance's log.
	Previous bool
	// Since, when set, drops lines older than it.
	Since time.Time
	// LimitBytes, when positive, caps what is returned.
	LimitBytes int
}

// Provider is one external GPU provider. Every method is called with a
// deadline and must be safe for concurrent use.
type Provider interface {
	// Create starts a remote workload for the pod under id, with the home
	// Secrets and ConfigMaps it reads. Creating an id that exists is not
	// an error (the node may have restarted between creating it and
	// seeing it listed).
	Create(ctx context.Context, id string, pod *v1.Pod, refs Refs) error
	// UpdateRefs brings an existing workload's copies of refs up to date
	// (how the node passes on a changed Secret); it never creates the
	// workload, and a missing one is an error wrapping ErrNotFound.
	UpdateRefs(ctx context.Context, id string, pod *v1.Pod, refs Refs) error
	// Adopt re-points an existing workload (a warm instance) at another
	// home pod, which it runs from now on: Get and List report pod as its
	// Pod. A missing workload is an error wrapping ErrNotFound.
	Adopt(ctx context.Context, id string, pod PodRef) error
	// Delete stops and removes the remote workload; a missing one is not
	// an error.
	Delete(ctx context.Context, id string) error
	// Get returns one remote workload, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (*Workload, error)
	// List returns every remote workload this node created.
	List(ctx context.Context) ([]Workload, error)
	// Capacity is what the provider can run for this node in total
	// (running workloads included), e.g. nvidia.com/gpu: 64.
	Capacity(ctx context.Context) (v1.ResourceList, error)
	// Health returns nil when the provider takes new workloads.
	Health(ctx context.Context) error
	// Logs streams one container's log of the workload; the caller closes
	// it. A provider that has no logs returns an error wrapping
	// ErrUnsupported, a missing workload one wrapping ErrNotFound.
	Logs(ctx context.Context, id, container string, opts LogOptions) (io.ReadCloser, error)
	// Carries is what of a pod the provider can run (volume types,
	// Secrets, ConfigMaps), published in the node's offer so the
	// scheduler moves only pods it can run; Create refuses the rest.
	Carries() offer.Carries
}

// Usage is what one remote workload's containers use, as its provider
// measured it at Time.
type Usage struct {
	// ID is the workload's id.
	ID         string
	Time       time.Time
	Containers []ContainerUsage
}

// ContainerUsage is one container's use.
type ContainerUsage struct {
	Name string
	// CPU is the cores in use (a rate over the provider's own window);
	// Memory the working set.
	CPU, Memory resource.Quantity
}

// UsageReader is a Provider that measures what its workloads use. The
// overflow node serves it as a kubelet does (/metrics/resource,
// /stats/summary), so metrics-server, kubectl top and a
// HorizontalPodAutoscaler see overflowed pods. A pod at a provider that
// is not one, or whose workload is not in the answer, has no usage: none,
// never zero.
type UsageReader interface {
	// Usage returns the latest measure of this node's workloads. A
	// provider that measures nothing returns an error wrapping
	// ErrUnsupported.
	Usage(ctx context.Context) ([]Usage, error)
}

// Refs are the home Secrets and ConfigMaps a pod reads (by env, envFrom
// or volume), from the pod's namespace, by name. The overflow node reads
// only these, and only a provider that carries them (Carries) is given a
// pod that has any. A provider keeps its copies with the workload and
// removes them with it; it never logs their data.
type Refs struct {
	Secrets    map[string]*v1.Secret
	ConfigMaps map[string]*v1.ConfigMap
}

// Empty reports whether there are no refs.
func (r Refs) Empty() bool { return len(r.Secrets) == 0 && len(r.ConfigMaps) == 0 }

// ErrNotFound is wrapped by Get for a workload that does not exist.
var ErrNotFound = errors.New("remote workload not found")

// ErrUnsupported is wrapped by Create for a pod the provider cannot run
// as written (e.g. a volume type it has no equivalent for); dispatch does
// not retry such a pod elsewhere without telling the user why.
var ErrUnsupported = errors.New("not supported by the provider")

// IDPrefix starts every id.
const IDPrefix = "sluice-"

// WarmPrefix starts the id of a warm instance.
const WarmPrefix = IDPrefix + "warm-"

// IDFor is the id of the remote workload running pod: derived from the
// pod's UID, so the same pod always maps to the same id (no duplicates
// after a restart) and a new pod with the same name does not.
func IDFor(uid types.UID) string { return IDPrefix + string(uid) }

// WarmIDFor is the id of the warm instance started for the victim of a
// make-before-break claim whose UID is uid; it keeps the id when the
// victim's replacement adopts it.
func WarmIDFor(uid types.UID) string { return WarmPrefix + string(uid) }

// IsWarm reports whether id is a warm instance's (WarmIDFor).
func IsWarm(id string) bool { return strings.HasPrefix(id, WarmPrefix) && len(id) > len(WarmPrefix) }

// UIDOf is the pod UID an id was derived from: for a warm instance, its
// victim's.
func UIDOf(id string) (types.UID, bool) {
	if IsWarm(id) {
		return types.UID(strings.TrimPrefix(id, WarmPrefix)), true
	}
	if !strings.HasPrefix(id, IDPrefix) || len(id) == len(IDPrefix) {
		return "", false
	}
	return types.UID(strings.TrimPrefix(id, IDPrefix)), true
}

// Unadopted reports whether w is a warm instance that still runs its
// victim (no replacement has adopted it).
func (w *Workload) Unadopted() bool {
	uid, _ := UIDOf(w.ID)
	return IsWarm(w.ID) && uid == w.Pod.UID
}

// Validate checks a workload as a provider reported it; what fails here is
// a provider bug, reported with the provider's name and left alone.
func (w *Workload) Validate() error {
	switch {
	case w.ID == "":
		return fmt.Errorf("workload without an id")
	case w.Pod.Namespace == "" || w.Pod.Name == "" || w.Pod.UID == "":
		return fmt.Errorf("workload %s: pod namespace, name and uid are required", w.ID)
	case !w.Phase.Valid():
		return fmt.Errorf("workload %s: unknown phase %q", w.ID, w.Phase)
	}
	if IsWarm(w.ID) {
		// A warm instance runs its victim, or the replacement that
		// adopted it.
		return nil
	}
	if uid, ok := UIDOf(w.ID); !ok || uid != w.Pod.UID {
		return fmt.Errorf("workload %s: id does not match pod uid %s", w.ID, w.Pod.UID)
	}
	return nil
}

// UsableAddress reports why an address a provider reported cannot be a
// pod IP: not an IP, or one EndpointSlices refuse (unspecified, loopback,
// link-local, multicast); nil when it can. The node drops such addresses
// (the workload still runs) rather than break the Services that select
// the pod.
func UsableAddress(a string) error {
	ip, err := netip.ParseAddr(a)
	switch {
	case err != nil || ip.Zone() != "":
		return fmt.Errorf("%q is not an IP address", a)
	case ip.Unmap().IsUnspecified(), ip.Unmap().IsLoopback(), ip.Unmap().IsLinkLocalUnicast(), ip.Unmap().IsMulticast():
		return fmt.Errorf("%s is unspecified, loopback, link-local or multicast: EndpointSlices refuse it", a)
	}
	return nil
}
