package guides
