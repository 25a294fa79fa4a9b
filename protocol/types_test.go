package protocol

import (
	"sort"
	"strings"
	"testing"
)

func TestTypes(t *testing.T) {
	types := Types()
	if len(types) != len(wantPayload) {
		t.Fatalf("len(Types()) = %d, want %d", len(types), len(wantPayload))
	}
	if !sort.SliceIsSorted(types, func(i, j int) bool { return types[i].Name < types[j].Name }) {
		t.Errorf("Types() is not sorted by name")
	}
	groups := map[string]bool{GroupTask: true, GroupRegistry: true, GroupCredit: true, GroupMentor: true,
		GroupSecurity: true, GroupHandshake: true, GroupGeneric: true}
	for _, info := range types {
		t.Run(info.Name, func(t *testing.T) {
			if _, ok := wantPayload[info.Name]; !ok {
				t.Errorf("Types() lists %q, which the tests do not know", info.Name)
			}
			if got, ok := Lookup(info.Name); !ok || got.Name != info.Name {
				t.Errorf("Lookup(%q) = %+v, %v", info.Name, got, ok)
			}
			if !groups[info.Group] {
				t.Errorf("Lookup(%q).Group = %q, not a Group constant", info.Name, info.Group)
			}
			if info.UDP != (info.Name == TypeAgentAnnounce) {
				t.Errorf("Lookup(%q).UDP = %v", info.Name, info.UDP)
			}
			security := strings.HasPrefix(info.Name, "auth.") || strings.HasPrefix(info.Name, "zone.") || info.Name == TypeKeyRotate
			if info.Security != security {
				t.Errorf("Lookup(%q).Security = %v, want %v", info.Name, info.Security, security)
			}
			if info.NoReply != (info.Name == TypeAck || info.Name == TypeError) {
				t.Errorf("Lookup(%q).NoReply = %v", info.Name, info.NoReply)
			}
			if info.Name != strings.ToLower(info.Name) {
				t.Errorf("TYPE %q is not lower case", info.Name)
			}
		})
	}
}

func TestLookupIsExact(t *testing.T) {
	tests := []struct {
		typ  string
		want bool
	}{
		{"task.assign", true},
		{"plan.approval.response", true},
		{"ack", true},
		{"Task.Assign", false},
		{"TASK.ASSIGN", false},
		{" task.assign", false},
		{"task.assign ", false},
		{"task_assign", false},
		{"task", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			if _, ok := Lookup(tt.typ); ok != tt.want {
				t.Errorf("Lookup(%q) = _, %v, want %v", tt.typ, ok, tt.want)
			}
		})
	}
}

// TestNearestType: a TYPE a typo away is suggested; one nothing is near,
// or two are equally near, is not.
func TestNearestType(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"task.asign", TypeTaskAssign, true},
		{"task.assgin", TypeTaskAssign, true}, // two letters swapped
		{"credit.transfr", TypeCreditTransfer, true},
		{"registry.updte", TypeRegistryUpdate, true},
		{"foo.bar", "", false},
		{"zone.xxxx", "", false},
	}
	for _, tc := range tests {
		got, ok := NearestType(tc.in)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("NearestType(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
