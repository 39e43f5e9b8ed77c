import matplotlib

matplotlib.use("Agg")  # figures in tests are built, never shown
