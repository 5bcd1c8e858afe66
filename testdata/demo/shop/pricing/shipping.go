// Package pricing decides what an order costs to ship.
package pricing

// FreeShippingThreshold is the order total, in euros, from which shipping is free.
const FreeShippingThreshold = 50

// Shipping returns the shipping cost of an order of total euros.
func Shipping(total float64) float64 {
	if total >= FreeShippingThreshold {
		return 0
	}
	return 4.90
}
