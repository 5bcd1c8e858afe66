// Package checkout renders the order summary.
package checkout

import "fmt"

// Summary is the last screen before payment.
func Summary(subtotal, shipping float64) string {
	return fmt.Sprintf("subtotal %.2f\nshipping %.2f\ntotal %.2f\n", subtotal, shipping, subtotal+shipping)
}
