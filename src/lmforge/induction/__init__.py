"""The induction-head study: does a 2-layer decoder form an induction head, and when, as a controlled
share of its training windows repeats an earlier span (Olsson et al. 2022; Reddy 2024)?"""
