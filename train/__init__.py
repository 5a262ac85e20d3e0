"""decide.train: masked-diffusion fine-tuning on decision blocks, and the data it learns from."""
