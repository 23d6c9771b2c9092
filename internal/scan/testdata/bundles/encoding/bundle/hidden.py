# -*- coding: utf-7 -*-
import torch
x = 1  # +AAo-import os
