"""Human annotation: ratings collected from people, and how far the judge agrees with them."""
