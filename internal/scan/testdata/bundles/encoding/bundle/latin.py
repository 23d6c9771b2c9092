# -*- coding: latin-1 -*-
import torch
name = "café"
import marshal
