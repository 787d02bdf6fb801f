package domain_test

import (
	"testing"

	"github.com/choreo-saga/choreo/services/payment/internal/domain"
)

func TestDecideCharge(t *testing.T) {
	acct := func(b int64) *domain.Account { return &domain.Account{CustomerID: "c-1", Balance: b, Currency: "JPY"} }
	tests := []struct {
		name     string
		existing *domain.Payment
		account  *domain.Account
		amount   int64
		want     domain.ChargeAction
		detail   string
	}{
		{"EnoughBalanceDebits", nil, acct(5000), 5000, domain.ChargeDebit, ""},
		{"ZeroAmountDebits", nil, acct(0), 0, domain.ChargeDebit, ""},
		{"LowBalanceDeclines", nil, acct(4999), 5000, domain.ChargeDecline, domain.DeclineInsufficientFunds},
		{"UnknownCustomerDeclines", nil, nil, 1, domain.ChargeDecline, domain.DeclineUnknownCustomer},
		{"OtherCurrencyDeclines", nil, &domain.Account{CustomerID: "c-1", Balance: 99999, Currency: "USD"}, 5000, domain.ChargeDecline, domain.DeclineCurrencyMismatch},
		{"AlreadyChargedSkips", &domain.Payment{Status: domain.StatusCompleted}, acct(99999), 5000, domain.ChargeSkip, ""},
		{"AlreadyDeclinedSkips", &domain.Payment{Status: domain.StatusDeclined}, acct(99999), 5000, domain.ChargeSkip, ""},
		{"RefundArrivedFirstSkips", &domain.Payment{Status: domain.StatusRefunded}, acct(99999), 5000, domain.ChargeSkip, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := domain.DecideCharge(tt.existing, tt.account, tt.amount, "JPY")
			if got.Action != tt.want || got.Detail != tt.detail {
				t.Fatalf("DecideCharge = %+v, want action %v detail %q", got, tt.want, tt.detail)
			}
		})
	}
}

// decision is one case of a compensation's decision table: the order's
// payment record and its customer's account (nil: none), and the action
// wanted.
type decision[A comparable] struct {
	name     string
	existing *domain.Payment
	account  *domain.Account
	want     A
}

// checkDecisions runs a decision table against decide, DecideRefund or
// DecideCancel, each case a subtest.
func checkDecisions[A comparable](t *testing.T, decide func(*domain.Payment, *domain.Account) A, tests []decision[A]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(tt.existing, tt.account); got != tt.want {
				t.Fatalf("decision = %v, want %v", got, tt.want)
			}
		})
	}
}

// jpy is an account that a charge in JPY can be credited back to; charged
// is a COMPLETED charge in JPY.
var (
	jpy     = &domain.Account{CustomerID: "c-1", Balance: 100, Currency: "JPY"}
	charged = &domain.Payment{Status: domain.StatusCompleted, Amount: 5000, Currency: "JPY"}
)

func TestDecideRefund(t *testing.T) {
	checkDecisions(t, domain.DecideRefund, []decision[domain.RefundAction]{
		{"CompletedIsCredited", charged, jpy, domain.RefundCredit},
		{"SecondRefundSkips", &domain.Payment{Status: domain.StatusRefunded, Currency: "JPY"}, jpy, domain.RefundSkip},
		{"DeclinedHasNothingToRefund", &domain.Payment{Status: domain.StatusDeclined}, nil, domain.RefundSkip},
		{"RefundBeforeChargeLeavesTombstone", nil, nil, domain.RefundTombstone},
		{"OtherCurrencyIsRefused", charged, &domain.Account{CustomerID: "c-1", Currency: "USD"}, domain.RefundRefuse},
		{"AccountGoneIsRefused", charged, nil, domain.RefundRefuse},
	})
}

func TestDecideCancel(t *testing.T) {
	checkDecisions(t, domain.DecideCancel, []decision[domain.CancelAction]{
		{"ChargedIsCredited", charged, jpy, domain.CancelCredit},
		{"CancelBeforeChargeLeavesTombstone", nil, nil, domain.CancelTombstone},
		{"DeclinedIsOnlyAcknowledged", &domain.Payment{Status: domain.StatusDeclined}, nil, domain.CancelAcknowledge},
		// A compensation refunded it first: the cancel must not credit again.
		{"RefundedByCompensationIsOnlyAcknowledged", &domain.Payment{Status: domain.StatusRefunded, Amount: 5000, Currency: "JPY"}, jpy, domain.CancelAcknowledge},
		{"RefundTombstoneIsOnlyAcknowledged", &domain.Payment{Status: domain.StatusRefunded}, nil, domain.CancelAcknowledge},
		{"SecondCancelSkips", &domain.Payment{Status: domain.StatusRefunded, Amount: 5000, Currency: "JPY", Cancelled: true}, jpy, domain.CancelSkip},
		{"SecondCancelOfTombstoneSkips", &domain.Payment{Status: domain.StatusRefunded, Cancelled: true}, nil, domain.CancelSkip},
		{"OtherCurrencyIsRefused", charged, &domain.Account{CustomerID: "c-1", Currency: "USD"}, domain.CancelRefuse},
		{"AccountGoneIsRefused", charged, nil, domain.CancelRefuse},
	})
}

// TestCancelAndRefundNeverCreditTwice: whichever of a compensation's refund
// and a cancel comes first, the one after it credits nothing.
func TestCancelAndRefundNeverCreditTwice(t *testing.T) {
	jpy := &domain.Account{CustomerID: "c-1", Currency: "JPY"}
	refunded := &domain.Payment{Status: domain.StatusRefunded, Amount: 5000, Currency: "JPY"}
	if got := domain.DecideCancel(refunded, jpy); got == domain.CancelCredit {
		t.Errorf("cancel after refund = CancelCredit, want no credit")
	}
	cancelled := &domain.Payment{Status: domain.StatusRefunded, Amount: 5000, Currency: "JPY", Cancelled: true}
	if got := domain.DecideRefund(cancelled, jpy); got != domain.RefundSkip {
		t.Errorf("refund after cancel = %v, want RefundSkip", got)
	}
}

// TestReasonIsTheCodeAlone: GET /payments answers a reason code from the
// API's enum, whatever note the reaction put before it in the detail.
func TestReasonIsTheCodeAlone(t *testing.T) {
	tests := []struct{ detail, want string }{
		{"", ""},
		{"insufficient_funds", "insufficient_funds"},
		{"shipping_unavailable", "shipping_unavailable"},
		{domain.NoteRefundBeforeCharge + "out_of_stock", "out_of_stock"},
		{domain.NoteCancelBeforeCharge + "customer_cancelled", "customer_cancelled"},
		{domain.NoteCancelled + "timeout", "timeout"},
	}
	for _, tt := range tests {
		if got := domain.Reason(tt.detail); got != tt.want {
			t.Errorf("Reason(%q) = %q, want %q", tt.detail, got, tt.want)
		}
	}
}
