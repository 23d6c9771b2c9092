print("é")
